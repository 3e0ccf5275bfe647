"""Plug-in strategies: a class named package.module:ClassName or registered under the
entry-point group al_audit.strategies runs like a shipped strategy; one that does not load
is unavailable with the reason; its code is part of the store fingerprint."""
import sys
import textwrap
from importlib import metadata

import pytest

import adapters
from audit.engine.replay import ReproduceRequest, plan_replay
from audit.engine.runner import run_trial
from audit.engine.splits import make_split
from audit.engine.store import fingerprint_details
from audit.errors import AuditError
from audit.protocols import load_protocol

PLUGIN = '''
import numpy as np
from adapters.base import QueryStrategy

class Last(QueryStrategy):
    """The last candidates in pool order."""
    implements = "last in pool order"
    param_defaults = {"offset": 0}

    def __init__(self, query_model=None, random_state=None, **params):
        super().__init__(query_model, random_state, **params)
        if self.params["offset"] < 0:
            raise ValueError("offset must be >= 0")

    def _select(self, X, y, model, batch_size, candidates, rng):
        return np.asarray(candidates)[::-1][self.params["offset"]:][:batch_size]

class NotAStrategy:
    pass
'''


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    package = tmp_path / "myplugins"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m.startswith("myplugins")]:
        del sys.modules[name]


def protocol_with(tmp_path, implementation, params="{}"):
    path = tmp_path / "p.toml"
    path.write_text(f'extends = "lu2023"\nname = "with-plugin"\nbase_strategies = ["uniform"]\n'
                    f'[strategies.mine]\nimplementation = "{implementation}"\nparams = {params}\n')
    return load_protocol(path)


def test_a_class_path_runs_like_a_shipped_strategy(tmp_path, plugin_module, sonar):
    protocol = protocol_with(tmp_path, "myplugins:Last")
    assert adapters.strategy_class("myplugins:Last").__name__ == "Last"
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "mine", 0)
    assert result.status == "ok"
    queried = [q for r in result.rounds for q in r.queried]
    pool = make_split(protocol, sonar.y, 0).pool
    assert queried == list(pool[::-1][:len(queried)])  # the plug-in's rule: the last candidates in pool order
    assert "plug-in myplugins:Last" in adapters.strategy_class("myplugins:Last").library_version()


@pytest.mark.parametrize("implementation, message", [
    ("myplugins:Nope", "does not load: AttributeError"),
    ("nosuchpackage.mod:Cls", "does not load: ModuleNotFoundError"),
    ("myplugins:NotAStrategy", "is not a subclass of adapters.base.QueryStrategy"),
    ("myplugins:", "is not of the form package.module:ClassName"),
    ("my plugins:Last", "is not of the form"),
])
def test_a_plugin_that_does_not_load_is_unavailable_with_the_reason(plugin_module, implementation, message):
    assert message in adapters.unavailable_reason(implementation)


def test_bad_plugins_stop_a_replay_before_any_trial(tmp_path, plugin_module, sonar):
    for implementation, params, message in [("myplugins:NotAStrategy", "{}", "not a subclass"),
                                            ("myplugins:Last", "{ offset = -1 }", "cannot be constructed: ValueError"),
                                            ("myplugins:Last", "{ colour = 1 }", "does not use parameter\\(s\\) colour")]:
        request = ReproduceRequest(protocol_with(tmp_path, implementation, params), "sonar", strategies=["mine"])
        with pytest.raises(AuditError, match=message):
            plan_replay(request)


def test_entry_points_register_implementations(monkeypatch, plugin_module):
    entry = metadata.EntryPoint(name="mine.last", value="myplugins:Last", group=adapters.ENTRY_POINT_GROUP)
    broken = metadata.EntryPoint(name="mine.broken", value="myplugins:Gone", group=adapters.ENTRY_POINT_GROUP)
    monkeypatch.setattr(adapters, "_entry_points", lambda: {"mine.last": entry, "mine.broken": broken})
    assert adapters.strategy_class("mine.last").__name__ == "Last"
    assert {"mine.last", "mine.broken"} <= set(adapters.implementations())
    assert "does not load" in adapters.unavailable_reason("mine.broken")
    from audit.engine.capabilities import format_plugins

    listing = format_plugins()
    assert "mine.last = myplugins:Last" in listing and "available" in listing
    assert "mine.broken = myplugins:Gone" in listing and "unavailable: plug-in 'mine.broken' does not load" in listing
    with pytest.raises(AuditError, match="unknown implementation 'mine.nope'"):
        adapters.strategy_class("mine.nope")


def test_the_fingerprint_covers_the_plugins_code(tmp_path, plugin_module):
    protocol = protocol_with(tmp_path, "myplugins:Last")
    before = fingerprint_details(protocol)
    assert set(before["plugins"]) == {"myplugins:Last"}
    (plugin_module / "helpers.py").write_text("FACTOR = 2\n")  # any file of its package counts
    assert fingerprint_details(protocol)["plugins"] != before["plugins"]
    assert "plugins" not in fingerprint_details(load_protocol("lu2023"))  # shipped strategies: the code hash


BROKEN = '''
import numpy as np
from adapters.base import QueryStrategy

class Unseeded(QueryStrategy):
    """Random picks from an unseeded generator: the same seed does not give the same queries."""
    implements = "unseeded random sampling"

    def _select(self, X, y, model, batch_size, candidates, rng):
        return np.random.default_rng().choice(candidates, size=batch_size, replace=False)
'''


def check_command(tmp_path, *args):
    import subprocess

    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "audit.cli.main", "check-strategy", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path)


def test_check_strategy_command_passes_a_conforming_plugin_and_names_each_check(tmp_path, plugin_module):
    done = check_command(tmp_path, "myplugins:Last", "--params", '{"offset": 1}')
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pass  check_hidden_labels_unread" in done.stdout and "pass  check_parameter_case[offset=1]" in done.stdout
    assert "10 of 10 checks passed" in done.stdout


def test_check_strategy_command_fails_a_breach_with_its_reason(tmp_path, plugin_module):
    (plugin_module / "broken.py").write_text(textwrap.dedent(BROKEN))
    done = check_command(tmp_path, "myplugins.broken:Unseeded")
    assert done.returncode == 1
    failing = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert any(line.startswith("FAIL  check_deterministic: AssertionError: ") for line in failing), done.stdout


@pytest.mark.parametrize("args, message", [
    (("nosuch:X",), "does not load"), (("myplugins:Last", "--params", "{oops"), "--params is not JSON"),
    (("myplugins:Last", "--params", "[1]"), "must be a JSON object")])
def test_check_strategy_command_bad_input_is_one_line(tmp_path, plugin_module, args, message):
    done = check_command(tmp_path, *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr
