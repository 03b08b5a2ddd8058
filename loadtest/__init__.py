"""Lakegate's benchmark (`python -m loadtest`, `make bench`)."""

import os

# The bench process holds gRPC channels and threads when the writes scenario starts Spark's JVM
# through subprocess.Popen. With fork support on, grpcio's fork handlers can kill that forked
# child before its exec (grpc/grpc#43055, grpcio 1.80 and later): "Java gateway process exited
# before sending its port number", the writes scenario lost (seen once in a full run). The
# bench forks nothing that uses gRPC (its load workers are spawned), so it turns them off,
# before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
