"""The fence a batch is written with: the archiver's epochs for the batch's partitions, sent to
the store as two arrays in the same order (archiver/fences.py)."""

from __future__ import annotations

from archiver.fences import Fence, new_owner


def test_a_batch_checks_only_its_own_partitions_epochs() -> None:
    held = Fence("pageviews", "vm:1:abc", {2: 7, 0: 5, 1: 6})
    batch = held.of({0, 2})
    assert batch.epochs == {0: 5, 2: 7}
    assert held.epochs == {2: 7, 0: 5, 1: 6}  # the archiver's own fences are left as they are
    assert batch.parameters() == {
        "fence_topic": "pageviews",
        "fence_owner": "vm:1:abc",
        "fence_partitions": [0, 2],
        "fence_epochs": [5, 7],
    }


def test_a_partition_never_taken_is_not_in_the_batchs_fence() -> None:
    """Its rows are then refused (the store looks its epoch up as 0, never a taken one)."""
    assert Fence("pageviews", "o", {0: 1}).of({0, 3}).epochs == {0: 1}


def test_each_archiver_process_has_an_owner_name_of_its_own() -> None:
    assert new_owner() != new_owner()
