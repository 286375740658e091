"""What an engine tells the rest of the lab: the one shape every ``lab.engines`` module fills in.

Each hook is called for every run, or only for a run of the engine's own pipelines, as its attribute says;
the defaults do nothing, so an engine names only what it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


def _nothing(*_args, **_kwargs) -> None:
    return None


def _none_stated(_cfg, _spec) -> dict:
    return {}


@contextmanager
def _no_services(_cfg, _run_dir, _write_event) -> Iterator[None]:
    yield


@dataclass(frozen=True)
class Engine:
    """One engine's hooks.

    Attributes
    ----------
    name : str
        The registry's ``engine`` value, and the :class:`lab.config.RunConfig` field holding :attr:`options`.
    words : str
        The engine as a reader names it (``Apache Spark``).
    options : type
        Its frozen options group: one field per parameter, named as the parameter (``--wal`` is ``wal``), with
        the default a run of any pipeline has.
    check : callable
        ``check(cfg, spec, pipelines)`` (``spec``: the run's registry entry, ``pipelines``: the registry), for every
        run: raise :class:`lab.errors.LabError` naming a bad value of its group and the valid choices, or one of its
        settings changed for a pipeline of another engine.
    after_query : bool
        ``check`` runs after the query's own check (it may assume the query is one the pipeline runs); else before
        (so a refusal names the engine's setting, not the query it implies).
    environment : callable
        ``environment() -> dict``: flat settings its ``LAB_*`` variables give (parameters win over them).
    defaults : callable
        ``defaults(base, params, spec)``, for every run, before the config is built: fill ``base`` (the flat
        parameters) where a setting of this engine decides another one's default. ``params`` is what was given.
    resolve : callable
        ``resolve(cfg, spec, params) -> dict``, for every run, once the config is built: flat settings to set so
        that ``config.json`` states what ``auto`` became.
    stated : callable
        ``stated(cfg, spec) -> dict``, for every run: what a report's settings say beside the pipeline's options.
    requirements : dict
        Fault kinds and named points of :mod:`lab.faults.catalogue` this engine's settings decide:
        ``name -> requires(cfg)`` returning why the run cannot carry it out, or ``None``.
    check_reachable : callable
        ``check_reachable(cfg)``, for a run of its pipelines, before the run directory: raise for an unreachable
        service of the engine's own (a Spark master).
    prepare : callable
        ``prepare(cfg, spec, write_event)``, for a run of its pipelines, once before its first driver: drivers never
        download or build.
    services : callable
        ``services(cfg, run_dir, write_event)``: a context manager the supervisor holds from before the first
        driver to the run's end (Storm's ZooKeeper).
    kill_executor : callable or None
        ``kill_executor(driver_pid, cfg, targets, run_dir) -> pid or None``: the executor-crash fault.
    """

    name: str
    words: str
    options: type
    check: Callable
    after_query: bool = False
    environment: Callable = dict
    defaults: Callable = _nothing
    resolve: Callable = field(default=lambda _cfg, _spec, _params: {})
    stated: Callable = _none_stated
    requirements: dict = field(default_factory=dict)
    check_reachable: Callable = _nothing
    prepare: Callable = _nothing
    services: Callable = _no_services
    kill_executor: Callable | None = None
