"""The samza pipeline's pure parts: its defaults, the job's configuration, and its one-line errors."""

import pytest

from lab.config import make_config
from lab.errors import LabError


def test_samza_counts_per_key_into_its_output_topic_by_default():
    from lab.samza import settings as samza_settings

    cfg = make_config(pipeline="samza", nodes=1)
    assert (cfg.query, cfg.sink, cfg.samza.samza_store_cache) == ("key-count", "topic", "off")
    job = samza_settings.job_config(cfg, run_id="r", attempt=2, bootstrap="127.0.0.1:9", state_dir="/s", output="o")
    assert job["stores.counts.changelog"] == f"kafka.{cfg.topic}.changelog"
    assert job["stores.counts.object.cache.size"] == "0" and job["task.commit.ms"] == "1000"
    assert job["job.logged.store.base.dir"] == "/s/logged" and job["lab.attempt"] == "2"
    assert job["task.transactional.state.restore.enabled"] == "true"
    on = samza_settings.job_config(make_config(pipeline="samza", samza_store_cache="on"), run_id="r", attempt=1,
                                   bootstrap="b", state_dir="/s", output="o")
    assert on["stores.counts.object.cache.size"] == "1000"
    assert samza_settings.properties_text({"a.b": "127.0.0.1:9"}) == "a.b=127.0.0.1\\:9\n"


@pytest.mark.parametrize("params, words", [
    ({"pipeline": "samza", "query": "passthrough"}, ["'samza'", "key-count", "'passthrough'"]),
    ({"pipeline": "samza", "samza_store_cache": "sometimes"}, ["'sometimes'", "off", "on"]),
    ({"pipeline": "plain", "samza_store_cache": "on"}, ["--samza-store-cache", "'plain'"]),
    ({"pipeline": "samza", "sink": "append"}, ["'append'", "topic"]),
    ({"pipeline": "samza", "faults": "driver-crash@batch=2:mid-output"}, ["mid-output", "after-output-before-commit"]),
])
def test_bad_samza_settings_are_one_line_naming_the_choices(params, words):
    with pytest.raises(LabError) as e:
        make_config(**params)
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)
