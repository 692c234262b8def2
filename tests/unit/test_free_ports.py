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
