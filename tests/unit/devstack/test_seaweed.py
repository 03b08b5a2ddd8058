from devstack import seaweed


def test_iam_document_scopes_the_role_to_the_warehouse_prefix():
    keys = seaweed.SeaweedKeys.generate()
    doc = seaweed.iam_document(keys, bucket="warehouse", key_prefix="lakehouse")
    (role,) = doc["roles"]
    assert role["roleArn"] == seaweed.ROLE_ARN
    statement = role["trustPolicy"]["Statement"][0]
    assert statement["Principal"]["AWS"] == seaweed.CATALOG_USER_ARN
    (policy,) = doc["policies"]
    assert policy["document"]["Statement"][0]["Resource"] == [
        "arn:aws:s3:::warehouse",
        "arn:aws:s3:::warehouse/lakehouse/*",
    ]
    catalog = next(i for i in doc["identities"] if i["name"] == "catalog")
    assert "Write" not in catalog["actions"]
    assert doc["policy"]["defaultEffect"] == "Deny"


def test_keys_repr_hides_secrets():
    keys = seaweed.SeaweedKeys.generate()
    assert keys.admin_secret_key not in repr(keys)
    assert keys.catalog_secret_key not in repr(keys)


def test_weed_argv_binds_loopback_and_keeps_files_in_the_run_dir(tmp_path):
    ports = seaweed.SeaweedPorts.from_list(list(range(20000, 20012)))
    argv = seaweed.weed_argv(tmp_path, ports, tmp_path / "iam.json", bucket="warehouse")
    assert "-ip.bind=127.0.0.1" in argv
    assert f"-logdir={tmp_path / 's3-logs'}" in argv
    assert "-s3.port=20000" in argv
    assert "-master.telemetry=false" in argv
    # the metrics listener (the bench's store tally) binds loopback too, on its own free port
    assert "-metricsPort=20011" in argv
    assert "-metricsIp=127.0.0.1" in argv
    assert argv.index(f"-logdir={tmp_path / 's3-logs'}") < argv.index("mini")
