"""Notebook runs share the test session's broker, as runs of one machine share `lab broker start`'s."""

import pytest


@pytest.fixture
def shared_runs_dir(runs_dir, session_broker):
    """``runs_dir`` with the session's broker recorded in it: a notebook's runs and ``nb.start_broker()`` use it.

    A broker recorded there is never stopped by a notebook (``lab.notebook.stop_broker`` stops only
    the ones its kernel started), so the next test finds it running. Notebook 07's cluster has a
    runs directory of its own (``<runs>/cluster``) and is not affected.
    """
    from lab.broker import shared as shared_broker

    runs_dir.mkdir(parents=True, exist_ok=True)
    shared_broker.save_state(runs_dir, session_broker)
    return runs_dir
