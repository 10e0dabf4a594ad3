"""instance_info from a local fake IMDS: token flow, v1 fallback, token expiry, missing fields, time budget, DMI."""

from __future__ import annotations

from pathlib import Path

from neuron_monitor.daemon.report import INSTANCE_INFO_KEYS
from neuron_monitor.host.imds import InstanceInfoSource, fetch_instance_info
from neuron_monitor.host.rootfs import RootFS
from tests.host.fake_imds import FakeImds

EXPECTED = {
    "instance_name": "trainer-17",
    "instance_id": "i-0123456789abcdef0",
    "instance_type": "trn1.32xlarge",
    "instance_availability_zone": "us-west-2d",
    "instance_availability_zone_id": "usw2-az4",
    "instance_region": "us-west-2",
    "ami_id": "ami-0fedcba9876543210",
    "subnet_id": "subnet-0abc1234",
    "error": "",
}


def test_imdsv2_token_flow_fills_every_field() -> None:
    with FakeImds("v2") as imds:
        info = fetch_instance_info(imds.endpoint, budget=5.0).as_report()
    assert info == EXPECTED
    assert list(info) == [*INSTANCE_INFO_KEYS, "error"]
    put = [r for r in imds.requests if r[0] == "PUT"]
    assert len(put) == 1 and put[0][2]["X-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    assert all(r[2].get("X-aws-ec2-metadata-token") == "tok0" for r in imds.requests if r[0] == "GET")


def test_imdsv1_fallback() -> None:
    with FakeImds("v1") as imds:
        info = fetch_instance_info(imds.endpoint, budget=5.0).as_report()
    assert info == EXPECTED


def test_expired_token_is_renewed_once() -> None:
    with FakeImds("v2", expire_first_token=True) as imds:
        info = fetch_instance_info(imds.endpoint, budget=5.0).as_report()
    assert info["instance_id"] == EXPECTED["instance_id"]
    assert info["error"] == ""
    assert len([r for r in imds.requests if r[0] == "PUT"]) == 2


def test_optional_fields_absent_are_not_errors_required_are() -> None:
    md = {k: v for k, v in FakeImds().metadata.items() if not k.startswith(("placement/region", "tags/"))}
    with FakeImds("v2", metadata=md) as imds:
        info = fetch_instance_info(imds.endpoint, budget=5.0).as_report()
    assert info["instance_region"] == "" and info["instance_name"] == ""
    assert info["error"] == ""
    del md["ami-id"]
    with FakeImds("v2", metadata=md) as imds:
        info = fetch_instance_info(imds.endpoint, budget=5.0).as_report()
    assert info["error"] == "instance metadata missing: ami-id"
    assert info["instance_id"] == EXPECTED["instance_id"]


def test_unreachable_endpoint_fills_error_quickly() -> None:
    info = fetch_instance_info("http://127.0.0.1:9", budget=1.0).as_report()
    assert info["error"].startswith("instance metadata service unreachable")
    assert info["instance_id"] == ""


def test_hanging_service_gives_up_within_budget() -> None:
    with FakeImds("hang") as imds:
        info = fetch_instance_info(imds.endpoint, budget=0.3).as_report()
        assert imds.requests  # it did ask
    # the service holds every request for 60 s and then closes without answering: a timeout error (not a closed
    # connection) means the client gave up on its own budget
    assert "did not answer in time" in info["error"] or "timed out" in info["error"]


def test_source_never_blocks_and_fills_from_dmi(tmp_path: Path) -> None:
    dmi = tmp_path / "sys" / "class" / "dmi" / "id"
    dmi.mkdir(parents=True)
    (dmi / "product_name").write_text("trn2.48xlarge\n")
    (dmi / "board_asset_tag").write_text("i-0dmi000000000001\n")
    src = InstanceInfoSource("http://127.0.0.1:9", budget=0.5, retry=3600, root=RootFS(tmp_path))
    assert src.get()["error"] == "instance metadata not fetched yet"
    src.fetch_now()
    info = src.get()
    assert info["instance_type"] == "trn2.48xlarge"
    assert info["instance_id"] == "i-0dmi000000000001"
    assert info["error"].startswith("instance metadata service unreachable")
    src.close()


def test_disabled_source_uses_dmi_only(tmp_path: Path) -> None:
    src = InstanceInfoSource(enabled=False, root=RootFS(tmp_path))
    src.start()
    assert src.get()["error"] == "instance metadata disabled"
