"""What Kafka's documentation promises an acknowledged write, for the lab's replication scenario.

The scenario (notebook 07, the matrix's cluster rows): three replicas per
partition; the followers are held back (``follower-lag``) until they fall out of
the ISR; then the leader is killed (``leader-crash``) and restarted later on its
data. Kafka's configuration reference states the two settings that decide what
an acknowledged write survives then:

* ``min.insync.replicas``: "When a producer sets acks to "all" (or "-1"),
  min.insync.replicas specifies the minimum number of replicas that must
  acknowledge a write for the write to be considered successful." With
  ``acks=1`` only the leader acknowledges, whatever this says.
* ``unclean.leader.election.enable``: "Indicates whether to enable replicas not
  in the ISR set to be elected as leader as a last resort, even though doing so
  may result in data loss."

Eligible leader replicas (KIP-966, ``eligible.leader.replicas.version``) change
who may lead, not what was acknowledged: a replica removed from the ISR while the
ISR was already below ``min.insync.replicas`` holds every acknowledged write and
stays eligible for a clean election. So the claim on loss is the same with it on
or off; with ``min.insync.replicas=2`` and unclean election off it decides whether
the partition waits for its old leader.

So, in this scenario, acknowledged writes are lost exactly when an out-of-sync
follower may take over (unclean election on) and a write could be acknowledged
by the leader alone (``acks=1``, or ``acks=all`` with ``min.insync.replicas=1``
once the ISR has shrunk to the leader). :func:`claim` says that per setting; the
lab compares it with the final read (:mod:`lab.audit.topic`), never copies it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """The documented outcome of one setting: a :data:`lab.audit.expectations.EXPECTATIONS` key and the reason."""

    expect: str  # "acked-lost" or "acked-kept"
    why: str


def claim(acks: str, min_insync: int, unclean: str, elr: str | None = None) -> Claim:
    """The documented outcome of the follower-lag-then-leader-crash scenario for one setting.

    Parameters
    ----------
    acks : str
        The producer's ``acks`` (``"0"``, ``"1"`` or ``"all"``).
    min_insync : int
        The topic's ``min.insync.replicas``.
    unclean : str
        The topic's ``unclean.leader.election.enable`` as the lab writes it (``"on"`` or ``"off"``).
    elr : str, optional
        Eligible leader replicas as the run had them (``"on"``, ``"off"``; ``None``: unknown). Changes only the
        reason given for ``min.insync.replicas=2`` with unclean election off.
    """
    acks = str(acks)
    alone = acks in ("0", "1") or int(min_insync) < 2
    how = ("acks=1: the leader alone acknowledges" if acks == "1" else
           "acks=0: nothing is acknowledged by any broker" if acks == "0" else
           "acks=all with min.insync.replicas=1: once the ISR is the leader alone, the leader alone acknowledges"
           if alone else "acks=all with min.insync.replicas=2: no write is acknowledged by fewer than two replicas")
    if unclean == "on" and alone:
        return Claim("acked-lost", f"{how}; an out-of-sync follower becomes leader (unclean election) "
                                   "and the writes only the dead leader had are gone")
    if unclean == "on":
        return Claim("acked-kept", f"{how}; once the followers fall behind, writes fail at the producer "
                                   "instead (NotEnoughReplicas), so what was acknowledged is on a follower too")
    if elr == "on" and not alone:
        return Claim("acked-kept", f"{how}; unclean election off, eligible leader replicas on: a follower that left "
                                   "the ISR once it was below min.insync.replicas holds every acknowledged write and "
                                   "may be elected cleanly (KIP-966), so the partition need not wait for its old "
                                   "leader")
    return Claim("acked-kept", f"{how}; unclean election off: no out-of-sync follower may lead, the partition "
                               "waits for the old leader to come back with its log (unavailable meanwhile)")
