"""The e2e SparkSession (``devstack.spark_session``, as the demo and the long job use it) binds
and advertises loopback only: its JVM listens on loopback, and Spark's own idea of this host
(``Utils.localHostName``, what it advertises where no address is configured) is a loopback name,
not the machine's external interface."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

import psutil
import pytest

from devstack.processes import is_loopback, listen_addresses

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.e2e


def test_the_driver_binds_and_advertises_loopback_only(spark: SparkSession) -> None:
    sc = spark.sparkContext
    assert sc.getConf().get("spark.driver.host") == "127.0.0.1"
    assert sc.getConf().get("spark.driver.bindAddress") == "127.0.0.1"
    # "localhost" with SPARK_LOCAL_IP=127.0.0.1 (its reverse name); the external IP without it
    host = sc._jvm.org.apache.spark.util.Utils.localHostName()  # type: ignore[union-attr]
    assert is_loopback(socket.gethostbyname(host)), host
    jvms = [p for p in psutil.Process(os.getpid()).children(recursive=True) if "java" in p.name()]
    assert jvms, "the SparkSession's JVM is a child of this process"
    addresses = set().union(*(listen_addresses(p.pid) for p in jvms))
    assert addresses
    assert all(map(is_loopback, addresses)), sorted(addresses)
