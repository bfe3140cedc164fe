"""The scanner directory against PostgreSQL: fair shares, take-over of a scanner that stops
renewing (its lease passes in database time), rebalancing when one joins, a clean leave."""

from datetime import timedelta

import pytest
from django.conf import settings

from runs import scan_directory
from runs.models import BucketLease, ScannerMember
from kernel.clock import authority_now

pytestmark = pytest.mark.django_db


def shares(*scanners) -> dict[str, list[int]]:
    return {s: b for s, b in scan_directory.assignments().items() if s in scanners}


def assert_partition(held: dict[str, list[int]]) -> None:
    """Every bucket served by exactly one scanner, each within one of the others' share."""
    flat = [b for buckets in held.values() for b in buckets]
    assert sorted(flat) == list(range(settings.DUE_BUCKETS))
    sizes = [len(b) for b in held.values()]
    assert max(sizes) - min(sizes) <= 1, sizes


def test_quotas__an_equal_split__remainder_to_the_first_ids():
    assert scan_directory.quotas(["c", "a", "b"], 64) == {"a": 22, "b": 21, "c": 21}
    assert scan_directory.quotas(["a"], 64) == {"a": 64}


def test_claim_share__below_its_share__takes_free_first_then_from_the_most_above():
    owners = {b: "a" for b in range(40)} | {b: "b" for b in range(40, 60)}  # 60..63 free
    kept, taken = scan_directory.claim_share(owners, ["a", "b", "c"], "c", 64)
    assert kept == [] and len(taken) == 21
    assert set(taken) >= {60, 61, 62, 63}  # the free ones
    assert len([b for b in taken if owners.get(b) == "a"]) == 17  # a held 40 of a 22 share: 18 over


def test_claim_share__above_its_share__keeps_everything_until_taken():
    owners = {b: "a" for b in range(64)}
    assert scan_directory.claim_share(owners, ["a", "b"], "a", 64) == (list(range(64)), [])


def test_renew__three_scanners__a_fair_partition():
    for scanner in ("s1", "s2", "s3"):
        scan_directory.renew(scanner)
    scan_directory.renew("s1")  # joined alone first: gives up nothing itself, others took theirs
    assert_partition(shares("s1", "s2", "s3"))


def test_renew__a_scanner_stops_renewing__the_others_take_its_buckets_after_its_lease():
    for scanner in ("s1", "s2", "s3"):
        scan_directory.renew(scanner)
    lost = scan_directory.assignments()["s2"]
    versions = dict(BucketLease.objects.filter(bucket__in=lost).values_list("bucket", "version"))

    scan_directory.renew("s1")
    assert set(scan_directory.assignments()["s2"]) == set(lost)  # its lease still runs: untouched

    # s2's lease passes (database time moves past it).
    past = authority_now() - timedelta(seconds=1)
    ScannerMember.objects.filter(id="s2").update(lease_expires_at=past)
    BucketLease.objects.filter(scanner_id="s2").update(lease_expires_at=past)
    scan_directory.renew("s1")
    scan_directory.renew("s3")

    held = shares("s1", "s3")
    assert_partition(held)
    assert "s2" not in scan_directory.assignments()
    assert not ScannerMember.objects.filter(id="s2").exists()
    # The routing version of every moved bucket went up.
    assert all(BucketLease.objects.get(bucket=b).version == v + 1 for b, v in versions.items())


def test_renew__a_fourth_joins__it_takes_a_fair_share_and_the_others_let_go_on_renewal():
    for scanner in ("s1", "s2", "s3"):
        scan_directory.renew(scanner)
    mine = scan_directory.renew("s4")
    assert len(mine) == 16
    for scanner in ("s1", "s2", "s3", "s4"):
        scan_directory.renew(scanner)
    held = shares("s1", "s2", "s3", "s4")
    assert_partition(held)
    assert {len(b) for b in held.values()} == {16}


def test_leave__its_buckets_are_free_at_once():
    scan_directory.renew("s1")
    scan_directory.renew("s2")
    scan_directory.leave("s2")
    assert "s2" not in scan_directory.assignments()
    assert len(scan_directory.renew("s1")) == settings.DUE_BUCKETS
