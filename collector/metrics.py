"""The collector's Prometheus metrics (GET /metrics), on a registry of its own per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


def _registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


@dataclass
class CollectorMetrics:
    registry: CollectorRegistry = field(default_factory=_registry)

    def __post_init__(self) -> None:
        self.accepted = Counter(
            "tally_events_accepted", "Events acknowledged by Kafka", registry=self.registry
        )
        self.rejected = Counter(
            "tally_events_rejected", "Events refused, by reason", ["reason"], registry=self.registry
        )
        self.bots = Counter(
            "tally_bots_dropped", "Events from bots, answered 202 and dropped", registry=self.registry
        )
        self.excluded = Counter(
            "tally_events_excluded",
            "Events matching their site's exclusions (ip, path, country), answered 202 and dropped",
            ["rule"],
            registry=self.registry,
        )
        self.kafka_errors = Counter(
            "tally_kafka_errors", "Appends the log could not take", registry=self.registry
        )
        self.latency = Histogram(
            "tally_request_duration_seconds",
            "Time to answer an ingestion request",
            ["endpoint"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.blocked_clients = Gauge(
            "tally_blocked_clients", "Clients on the blocklist", registry=self.registry
        )
        self.site_rereads = Gauge(
            "tally_site_registry_rereads",
            "Re-reads of the site registry for events naming a site not known yet (total)",
            registry=self.registry,
        )
