"""Ports for servers a test or the bench starts: never inside the ephemeral range, where a
client connection can take one before its server binds it, and never handed out twice."""

from ops.local import ports


def test_a_free_port_lies_below_the_ephemeral_range_and_is_not_handed_out_twice() -> None:
    picked = [ports.free_port() for _ in range(50)]
    assert all(ports.LOWEST <= port < ports._ephemeral_start() for port in picked)
    assert len(set(picked)) == len(picked)


def test_a_block_shares_no_port_with_ports_handed_out_before() -> None:
    single = {ports.free_port() for _ in range(20)}
    base = ports.free_port_block(12)
    assert single.isdisjoint(range(base, base + 12))
    assert ports.free_port() not in range(base, base + 12)


def test_each_worker_picks_from_a_slice_of_its_own() -> None:
    lowest, below = ports.LOWEST, ports._ephemeral_start()
    width = (below - lowest) // 2
    first = [ports.free_port((0, 2)) for _ in range(30)]
    second = [ports.free_port_block(4, (1, 2)) for _ in range(30)]
    assert all(lowest <= port < lowest + width for port in first)
    assert all(lowest + width <= base and base + 4 <= lowest + 2 * width for base in second)


def test_the_worker_share_comes_from_xdist_s_environment() -> None:
    from tests.fixtures.ports import worker_share

    assert worker_share({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}) == (1, 2)
    assert worker_share({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "2"}) == (0, 2)
    assert worker_share({}) == (0, 1)  # outside xdist: the whole range
    assert worker_share({"PYTEST_XDIST_WORKER": "gw3", "PYTEST_XDIST_WORKER_COUNT": "2"}) == (0, 1)
