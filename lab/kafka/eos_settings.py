"""The kafka-eos pipeline's producer settings a run may change, and their check (pure).

``--delivery-timeout``, ``--trust-commit`` and ``--txn-client`` (:mod:`lab.pipelines.kafka_eos`,
:mod:`lab.kafka.transactions`, :mod:`lab.broker.java_producer`).
Stated in a run's settings only when changed (:attr:`lab.config.RunConfig.settings`), so they are not the
registry's ``options``, which every run and the matrix's labels state.
"""

from __future__ import annotations

from lab.errors import LabError, choices_error

#: The kafka-eos producer's delivery timeout (``--delivery-timeout``): how long a send may take, retries included.
#: Its bounds: more than one request's timeout (10 s, :mod:`lab.pipelines.kafka_eos`), so a send is tried at least
#: once in full; at most 45 s, so a batch that gives up is aborted within the 60 s transaction timeout.
DELIVERY_TIMEOUT_S = 45.0
DELIVERY_TIMEOUT_RANGE_S = (11.0, 45.0)
#: The pipelines that take ``--trust-commit``, ``--delivery-timeout`` and ``--txn-client``.
EOS_OPTION_PIPELINES = ("kafka-eos",)
#: The transactional producer's client (``--txn-client``): what each speaks of KIP-890 (measured on Kafka 4.4,
#: notebook 05 section 7).
TXN_CLIENTS = {
    "python": "kafka-python (EndTxn version 3 at most: transactions v1, one epoch for every transaction)",
    "java": "Kafka's Java client, kafka-clients 4.4.0 in a JVM beside the driver (transactions v2: a new epoch per "
            "transaction)",
}
DEFAULT_TXN_CLIENT = "python"


def check(cfg) -> None:
    """Raise :class:`LabError` naming a bad ``trust_commit``, ``delivery_timeout_s`` or ``txn_client``, or a pipeline
    without them."""
    if not isinstance(cfg.kafka.trust_commit, bool):
        raise choices_error("trust_commit setting", cfg.kafka.trust_commit, ("True", "False"))
    if cfg.kafka.txn_client not in TXN_CLIENTS:
        raise choices_error("transactional client (--txn-client)", cfg.kafka.txn_client, TXN_CLIENTS)
    low, high = DELIVERY_TIMEOUT_RANGE_S
    if not low <= cfg.kafka.delivery_timeout_s <= high:  # NaN too
        raise LabError(f"--delivery-timeout {cfg.kafka.delivery_timeout_s:g} s: valid {low:g} to {high:g} s (more than "
                       "one 10 s request, less than the 60 s transaction timeout with room to abort)")
    changed = [name for name, on in (("--trust-commit", cfg.kafka.trust_commit),
                                     ("--delivery-timeout", cfg.kafka.delivery_timeout_s != DELIVERY_TIMEOUT_S),
                                     ("--txn-client", cfg.kafka.txn_client != DEFAULT_TXN_CLIENT)) if on]
    if changed and cfg.pipeline not in EOS_OPTION_PIPELINES:
        raise LabError(f"{changed[0]} is the kafka-eos pipeline's transactional producer setting; this run's "
                       f"pipeline is {cfg.pipeline!r}; valid pipelines: {', '.join(EOS_OPTION_PIPELINES)}")


def stated(cfg) -> dict:
    """What a run's settings say of them: each only when changed from its default."""
    return {**({"trust_commit": True} if cfg.kafka.trust_commit else {}),
            **({"txn_client": cfg.kafka.txn_client} if cfg.kafka.txn_client != DEFAULT_TXN_CLIENT else {}),
            **({"delivery_timeout_s": cfg.kafka.delivery_timeout_s}
               if cfg.kafka.delivery_timeout_s != DELIVERY_TIMEOUT_S else {})}
