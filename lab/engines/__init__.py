"""Each engine's hooks: its options group, its checks and defaults, what a run prepares, starts and kills for it.

One module per engine (``spark``, ``flink``, ``storm``, ``samza``, and ``kafka`` for the pipelines that are a
Kafka client only); :class:`lab.engines.hooks.Engine` is what each one fills in. The registry
(:data:`lab.registry.ENGINES`) holds them; configuration, the fault plan's check and the supervisor ask it and
loop, so none of them names an engine or a pipeline.
"""
