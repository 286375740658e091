"""What a pipeline's query computes (``--query``): the words every layer shares.

Which pipelines run which query is each one's registry entry (:attr:`lab.registry.PipelineSpec.queries` and
``stateful_queries``); :mod:`lab.pipelines.structured.stateful` builds the stateful ones.
"""

#: Every query, with what it computes.
QUERIES = {
    "passthrough": "one record in, one row out (no state)",
    "window-count": "event-time tumbling windows counted per key, state in Spark's state store (update mode); "
                    "receiver: running counts per key with updateStateByKey",
    "dedupe": "dropDuplicatesWithinWatermark on the event id before the sink (state: the ids seen)",
    "key-count": "kafka-eos, samza: running counts per key, a local store and its compacted changelog (Samza's)",
    "session-count": "events per key and session (a gap of --session-gap seconds of event time ends one), with "
                     "transformWithStateInPandas: a state and an event-time timer per key (rocksdb state store)",
}
#: The stateful queries whose sink holds counts (``lab.sinks.spec.WindowRow``: a session in place of a window for
#: session-count), audited per window or session and key (lab.audit.window).
COUNT_QUERIES = ("window-count", "session-count")
