"""The S3 client's slim reading of botocore's data: the same endpoints for the services kept,
the same S3 model less its documentation text, one session for every client."""

import json
from pathlib import Path

import botocore
from botocore.loaders import Loader

from objectstore.botocore_data import ENDPOINT_SERVICES, endpoints_with
from objectstore.s3_client import _shared_session, s3_client

ENDPOINTS = Path(botocore.__file__).parent / "data" / "endpoints.json"


def test_endpoints_with__is_botocore_s_file_with_only_the_kept_services():
    text = ENDPOINTS.read_text()
    whole = json.loads(text)
    for partition in whole["partitions"]:
        partition["services"] = {k: v for k, v in partition["services"].items() if k in ENDPOINT_SERVICES}

    assert endpoints_with(text, ENDPOINT_SERVICES) == whole
    assert all("s3" in partition["services"] for partition in whole["partitions"])


def test_endpoints_with__reads_a_layout_it_does_not_know_whole():
    assert endpoints_with('{"partitions": {"aws": 1}}', ENDPOINT_SERVICES) == {"partitions": {"aws": 1}}
    text = ' { "version" : 3, "partitions" : [ { "services" : { "ec2" : {"x": [1]}, "s3" : { } } , "n" : null } ] } '
    assert endpoints_with(text, ENDPOINT_SERVICES) == {"version": 3, "partitions": [{"services": {"s3": {}}, "n": None}]}


def test_s3_model__is_botocore_s_without_its_documentation():
    ours = _shared_session().get_component("data_loader").load_service_model("s3", "service-2")
    theirs = Loader().load_service_model("s3", "service-2")

    def documentation(node, found):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "documentation" and isinstance(value, str):
                    found.append(value)
                else:
                    documentation(value, found)
        elif isinstance(node, list):
            for value in node:
                documentation(value, found)
        return found

    assert set(documentation(ours, [])) == {""}
    assert len(documentation(ours, [])) == len(documentation(theirs, [])) > 1000
    assert ours["operations"].keys() == theirs["operations"].keys()
    assert ours["shapes"]["PutObjectRequest"]["members"].keys() == theirs["shapes"]["PutObjectRequest"]["members"].keys()


def test_s3_client__every_client_shares_one_copy_of_the_model():
    first, second = s3_client("http://127.0.0.1:1", "us-east-1"), s3_client(None, "eu-west-1")

    assert first.meta.service_model._service_description is second.meta.service_model._service_description
    assert second.meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"


def test_s3_client__resolves_every_partition_as_botocore_does():
    import boto3

    for region in ("us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1", "eu-isoe-west-1"):
        ours = s3_client(None, region).meta
        theirs = boto3.session.Session().client("s3", region_name=region).meta
        assert (ours.endpoint_url, ours.region_name, ours.partition) == \
            (theirs.endpoint_url, theirs.region_name, theirs.partition), region
