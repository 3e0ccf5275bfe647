"""CI gating: suites, baselines, the paired statistics, JUnit XML against its schema, and a
real upgrade (a changed library default) gated end to end as drift, an unchanged one as identical."""
from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scipy import stats

from audit.analysis.stats import paired_tests, trials_needed
from audit.cli.main import main
from audit.errors import AuditError
from audit.gate.baseline import (
    CellRun,
    create_baseline,
    diff_data,
    load_baseline,
    protocol_changes,
    protocol_from_data,
)
from audit.gate.junit import junit_xml
from audit.gate.suite import load_suite
from audit.gate.verdicts import compare_cell, exit_code, gate
from audit.protocols import PROTOCOL_DIR

XSD = Path(__file__).resolve().parent / "junit-10-subset.xsd"
XS = "{http://www.w3.org/2001/XMLSchema}"


# --- a validator for the XSD subset (neither xmlschema nor lxml is installed) -----------

class SchemaError(AssertionError):
    pass


SIMPLE_TYPES = {
    "xs:string": re.compile(r".*", re.S),
    "xs:int": re.compile(r"[+-]?\d+"),
    "xs:decimal": re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)"),
    "xs:dateTime": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"),
}


def _content_regex(particle: ET.Element) -> str:
    """An xs:sequence / xs:choice / xs:element ref as a regex over 'tag ' tokens."""
    low, high = particle.get("minOccurs", "1"), particle.get("maxOccurs", "1")
    quantifier = "{%s,%s}" % (low, "" if high == "unbounded" else high)
    if particle.tag == XS + "element":
        body = re.escape(particle.get("ref") + " ")
    else:
        parts = [_content_regex(child) for child in particle]
        body = ("|" if particle.tag == XS + "choice" else "").join(parts)
    return f"(?:{body}){quantifier}"


def validate(document: ET.Element, schema_path: Path = XSD) -> None:
    """Check a document against the XSD subset the schema file uses: global elements,
    content models (sequence/choice/ref with occurrence bounds), declared attributes with
    their use and simple type, and no stray text outside mixed or simple content."""
    schema = ET.parse(schema_path).getroot()
    elements = {e.get("name"): e for e in schema.findall(XS + "element")}

    def check(node: ET.Element, path: str) -> None:
        where = f"{path}/{node.tag}"
        if node.tag not in elements:
            raise SchemaError(f"{where}: element not declared")
        decl = elements[node.tag]
        if decl.get("type"):  # simple content: text only
            if len(node) or node.attrib:
                raise SchemaError(f"{where}: simple-typed element with children or attributes")
            return
        ctype = decl.find(XS + "complexType")
        declared = {a.get("name"): a for a in ctype.findall(XS + "attribute")}
        for name, value in node.attrib.items():
            if name not in declared:
                raise SchemaError(f"{where}: attribute '{name}' not declared")
            if not SIMPLE_TYPES[declared[name].get("type")].fullmatch(value):
                raise SchemaError(f"{where}: attribute {name}={value!r} is not {declared[name].get('type')}")
        for name, attr in declared.items():
            if attr.get("use") == "required" and name not in node.attrib:
                raise SchemaError(f"{where}: required attribute '{name}' missing")
        if ctype.get("mixed") != "true":
            texts = [node.text] + [child.tail for child in node]
            if any(t and t.strip() for t in texts):
                raise SchemaError(f"{where}: text in element-only content")
        model = "".join(_content_regex(p) for p in ctype if p.tag in (XS + "sequence", XS + "choice"))
        children = "".join(f"{child.tag} " for child in node)
        if not re.fullmatch(model, children):
            raise SchemaError(f"{where}: children {children.split()} do not match the content model")
        for child in node:
            check(child, where)

    check(document, "")


# --- suites -------------------------------------------------------------------------------

def test_shipped_suites_load_and_cover_every_library():
    smoke = load_suite("smoke")
    libraries = {spec.implementation.split(".")[0] for spec in smoke.protocol.strategies.values()}
    assert libraries == {"native", "libact", "alipy", "skactiveml"}
    assert {"uniform", "us-c", "us-nc", "qbc"} <= set(smoke.strategies) and smoke.trials == 5
    assert set(smoke.protocol.strategies) == set(smoke.strategies)  # reduced to what the suite runs
    standard = load_suite("standard")
    assert len(standard.datasets) > len(smoke.datasets) and standard.trials > smoke.trials


GOOD = '''protocol = "lu2023"
datasets = ["sonar"]
strategies = ["uniform", "mine"]
trials = 2
[bindings.mine]
implementation = "skactiveml.uncertainty"
params = { method = "entropy" }
query_model = { name = "lr", params = { C = 0.1 } }
'''


@pytest.mark.parametrize("edit, message", [
    (("trials = 2", "trials = 2\ncolour = 1"), "unknown key(s) colour; allowed: name"),
    (('protocol = "lu2023"\n', ""), "'protocol' must name a protocol"),
    (('"lu2023"', '"nosuch"'), "unknown protocol 'nosuch'"),
    (('["sonar"]', '["sonar", "atlantis"]'), "unknown data set 'atlantis'"),
    (('["sonar"]', '["iris"]'), "'iris' is multiclass"),
    (('["sonar"]', '[]'), "'datasets' must be a non-empty list"),
    (('["uniform", "mine"]', '["uniform", "mine", "uniform"]'), "lists uniform more than once"),
    (('["uniform", "mine"]', '["uniform", "mine", "nosuch"]'), "strategy 'nosuch' is neither in protocol lu2023"),
    (("trials = 2", "trials = 0"), "'trials' must be a positive integer"),
    (("trials = 2", "trials = 2\nseeds = [1, 2]"), "give exactly one of 'trials'"),
    (("trials = 2", "seeds = [1, 1]"), "'seeds' must be a non-empty list of distinct"),
    (('"skactiveml.uncertainty"', '"skactiveml.nosuch"'), "unknown implementation 'skactiveml.nosuch'"),
    (('method = "entropy"', 'methd = "entropy"'), "does not use parameter(s) methd; it takes: method"),
    (("[bindings.mine]", "[bindings.mine]\ncolour = 1"), "binding 'mine' has unknown key(s) colour"),
    (('name = "lr"', 'name = "deep-net"'), "unknown model 'deep-net'"),
    (("[bindings.mine]", "[bindings.us-c]"), "binding 'us-c' would replace protocol lu2023's strategy"),
    (('["uniform", "mine"]', '["uniform"]'), "binding(s) mine not listed in 'strategies'"),
    (("trials = 2", "trials = [2"), "not valid TOML"),
])
def test_bad_suites_are_rejected_with_one_clear_line(tmp_path, edit, message):
    old, new = edit
    assert old in GOOD
    path = tmp_path / "suite.toml"
    path.write_text(GOOD.replace(old, new))
    with pytest.raises(AuditError) as err:
        load_suite(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_good_user_suite_and_unknown_names(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    suite = load_suite(path)
    assert suite.name == "mine" and suite.bindings["mine"]["implementation"] == "skactiveml.uncertainty"
    assert suite.protocol.strategy("mine").query_model.params == {"C": 0.1}
    with pytest.raises(AuditError, match="unknown suite 'nosuch'; shipped: smoke, standard"):
        load_suite("nosuch")


def test_yaml_suites(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("protocol: lu2023\ndatasets: [sonar]\nstrategies: [uniform, us-c]\ntrials: 3\n")
    try:
        import yaml  # noqa: F401
    except ImportError:
        with pytest.raises(AuditError, match="reading YAML needs PyYAML"):
            load_suite(path)
        return
    assert load_suite(path).strategies == ("uniform", "us-c")


# --- statistics ---------------------------------------------------------------------------

def test_paired_tests_match_scipy_and_tost_by_hand():
    diffs = [0.004, -0.002, 0.001, 0.003, 0.000, 0.002, -0.001, 0.002]
    result = paired_tests(diffs, margin=0.005, alpha=0.05)
    assert result.p_difference == pytest.approx(stats.ttest_1samp(diffs, 0).pvalue)
    lower = stats.ttest_1samp(diffs, -0.005, alternative="greater").pvalue
    upper = stats.ttest_1samp(diffs, 0.005, alternative="less").pvalue
    assert result.p_tost == pytest.approx(max(lower, upper))
    assert result.verdict == "equivalent" and -0.005 < result.ci[0] < result.ci[1] < 0.005
    assert result.dz == pytest.approx(result.mean / result.sd)


def test_drift_needs_significance_beyond_the_margin():
    assert paired_tests([0.06, 0.05, 0.07, 0.08, 0.055], 0.005, 0.05).verdict == "drift"
    small = paired_tests([0.003, 0.0031, 0.0029, 0.003, 0.0032], 0.005, 0.05)  # real, but inside the margin
    assert small.p_difference < 0.05 and small.verdict == "equivalent"
    noisy = paired_tests([0.03, -0.02, 0.01, 0.02, -0.03], 0.005, 0.05)
    assert noisy.verdict == "inconclusive" and noisy.trials_needed > 5


def test_trials_needed_is_the_smallest_n_meeting_the_power_condition():
    def holds(n, gap, quantile, sd):
        return (stats.t.ppf(quantile, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n) <= gap

    for mean, sd in [(0.001, 0.01), (-0.002, 0.004), (0.02, 0.05), (-0.012, 0.03), (0.0049, 0.01)]:
        gap, quantile = (0.005 - abs(mean), 0.95) if abs(mean) < 0.005 else (abs(mean), 0.975)
        n = trials_needed(mean, sd, 0.005, 0.05)
        assert holds(n, gap, quantile, sd) and (n == 2 or not holds(n - 1, gap, quantile, sd))
    assert trials_needed(0.005, 0.01, 0.005, 0.05) is None


def test_exact_differences_and_single_trials():
    assert paired_tests([0.0, 0.0, 0.0], 0.005, 0.05).verdict == "equivalent"  # queries moved, AUBC did not
    assert paired_tests([0.01, 0.01, 0.01], 0.005, 0.05).verdict == "drift"
    one = paired_tests([0.01], 0.005, 0.05)
    assert one.verdict == "inconclusive" and one.trials_needed is None


def test_exit_codes():
    assert exit_code(["identical", "equivalent", "inconclusive"], strict=False) == 0
    assert exit_code(["identical", "inconclusive"], strict=True) == 2
    assert exit_code(["identical", "drift"], strict=False) == 1
    assert exit_code(["drift", "error"], strict=False) == 2


def trial(seed, aubc, query_hash="q", status="ok", error=None):
    return {"seed": seed, "status": status, "aubc": aubc, "query_hash": query_hash, "error": error, "seconds": 0.1}


def test_compare_cell_verdicts():
    base = [trial(s, 0.7 + s / 100, f"q{s}") for s in range(4)]
    run = CellRun("sonar", "us-c", "native.margin", "native", [dict(t) for t in base])
    assert compare_cell(base, run, 0.005, 0.05)["verdict"] == "identical"
    same_queries = CellRun("sonar", "uniform", "native.uniform", "native",
                           [trial(s, 0.78 + s / 100 + s * 1e-3, f"q{s}") for s in range(4)])
    cell = compare_cell(base, same_queries, 0.005, 0.05)  # same queries, other AUBC: not identical
    assert cell["verdict"] == "drift" and cell["identical_queries"] == 4 and "d_z" in cell["message"]
    broken = CellRun("sonar", "us-c", "native.margin", "native",
                     [trial(0, None, None, "error", "LinAlgError: boom")] + [dict(t) for t in base[1:]])
    cell = compare_cell(base, broken, 0.005, 0.05)
    assert cell["verdict"] == "error" and "seed 0: ok -> error (LinAlgError: boom)" in cell["message"]
    both_fail = [trial(0, None, None, "error", "boom")] + base[1:]
    cell = compare_cell(both_fail, CellRun("sonar", "us-c", "native.margin", "native", [dict(t) for t in both_fail]),
                        0.005, 0.05)
    assert cell["verdict"] == "identical" and "1 trial(s) failed here and in the baseline alike" in cell["message"]
    missing = CellRun("sonar", "x", "nolib.x", "nolib", [], "unknown library 'nolib'")
    assert compare_cell(base, missing, 0.005, 0.05)["verdict"] == "error"


def test_protocol_changes_name_the_setting():
    before = {"title": "a", "path": "x.toml", "task_model": {"name": "svm-rbf", "params": {"C": 1.0, "gamma": "auto"}},
              "strategies": {"us-c": {"params": {}}}}
    after = {"title": "b", "path": "y.toml", "task_model": {"name": "svm-rbf", "params": {"C": 1.0, "gamma": "scale"}},
             "strategies": {"us-c": {"params": {"k": 2}}}}
    assert [str(c) for c in protocol_changes(before, after)] == [
        "strategies.us-c.params.k: (absent) -> 2", "task_model.params.gamma: auto -> scale"]
    assert [str(c) for c in diff_data({"numpy": "2.4.6"}, {"numpy": "2.5.0", "x": "1"})] == [
        "numpy: 2.4.6 -> 2.5.0", "x: (absent) -> 1"]


def test_junit_xml_of_every_verdict_validates_and_the_validator_is_not_vacuous():
    cells = [{"dataset": "sonar", "strategy": s, "library": "native", "verdict": v, "message": f"{v} here",
              "changed_settings": ["task_model.params.gamma: auto -> scale"], "seconds": 1.5}
             for s, v in [("a", "identical"), ("b", "equivalent"), ("c", "drift"), ("d", "inconclusive"), ("e", "error")]]
    report = {"suite": "t", "margin": 0.005, "alpha": 0.05, "strict": False, "seconds": 3.0,
              "generated_at": "2026-01-02T03:04:05+00:00", "protocol": {"name": "lu2023"},
              "environment": {"changes": [{"key": "numpy", "from": "1", "to": "2"}]}, "protocol_changes": [],
              "cells": cells}
    root = ET.fromstring(junit_xml(report))
    validate(root)
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("5", "1", "1", "1")
    assert suite.find("testcase[@name='c']/failure").get("type") == "drift"
    strict = ET.fromstring(junit_xml({**report, "strict": True}))
    validate(strict)
    assert strict.find("testsuite").get("errors") == "2"
    for breakage in (lambda r: r.find("testsuite").attrib.pop("tests"),
                     lambda r: r.find("testsuite").set("tests", "five"),
                     lambda r: r.find("testsuite/testcase").append(ET.Element("failure")),  # after system-out
                     lambda r: r.find("testsuite/testcase").set("colour", "red"),
                     lambda r: r.append(ET.Element("testcase", name="x"))):
        broken = ET.fromstring(junit_xml(report))
        breakage(broken)
        with pytest.raises(SchemaError):
            validate(broken)


# --- a real upgrade, end to end -------------------------------------------------------------

UNSCALED = {'[scaling]                     # none | train | labeled (refitted on the labeled set every round)\n'
            'task = "train"\nquery = "train"': '[scaling]\ntask = "none"\nquery = "none"'}
SUITE = '''name = "gamma-check"
protocol = "{protocol}"
datasets = ["sonar"]
strategies = ["uniform", "us-c"]
trials = 8
'''


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory, sonar):
    """A baseline of lu2023 on raw (unscaled) features with SVC(gamma='auto'), and the same
    protocol with gamma='scale': scikit-learn 0.22 changed SVC's default from 'auto' to
    'scale', the kind of silent default change the gate exists for."""
    root = tmp_path_factory.mktemp("gate")
    text = (PROTOCOL_DIR / "lu2023.toml").read_text()
    for old, new in UNSCALED.items():
        assert old in text
        text = text.replace(old, new)
    auto, scale = root / "lu2023-raw.toml", root / "lu2023-raw-scale.toml"
    auto.write_text(text)
    assert 'gamma = "auto" }\n\n[budget]' in text
    scale.write_text(text.replace('gamma = "auto" }\n\n[budget]', 'gamma = "scale" }\n\n[budget]'))
    suite_file = root / "suite.toml"
    suite_file.write_text(SUITE.format(protocol=auto))
    baseline = root / "baseline.json"
    create_baseline(load_suite(suite_file), baseline, progress=False, log=lambda _: None)
    return {"root": root, "baseline": baseline, "scale": scale, "auto": auto}


def test_the_baseline_records_suite_protocol_environment_and_every_trial(upgrade):
    b = load_baseline(upgrade["baseline"])
    assert b["suite"]["strategies"] == ["uniform", "us-c"] and b["suite"]["trials"] == 8
    assert b["protocol"]["data"]["task_model"]["params"]["gamma"] == "auto"
    assert set(b["protocol"]["data"]["strategies"]) == {"uniform", "us-c"}
    for key in ("python", "numpy", "scipy", "scikit-learn", "libact", "alipy", "scikit-activeml", "platform"):
        assert b["environment"][key]
    assert len(b["datasets"]["sonar"]["trial_seeds"]) == 8
    assert {(c["dataset"], c["strategy"]) for c in b["cells"]} == {("sonar", "uniform"), ("sonar", "us-c")}
    assert all(t["status"] == "ok" and len(t["query_hash"]) == 16 and 0 < t["aubc"] < 1
               for c in b["cells"] for t in c["trials"])


def test_a_changed_default_is_reported_as_drift_with_effect_size_and_setting(upgrade):
    out = upgrade["root"] / "drift"
    report = gate(upgrade["baseline"], protocol=upgrade["scale"], out=out, progress=False, log=lambda _: None)
    assert report["exit_code"] == 1
    assert [c["key"] for c in report["protocol_changes"]] == ["task_model.params.gamma"]
    cells = {c["strategy"]: c for c in report["cells"]}
    for sid in ("uniform", "us-c"):
        cell = cells[sid]
        assert cell["verdict"] == "drift" and cell["dataset"] == "sonar"
        assert cell["mean_difference"] > 0.02 and cell["dz"] > 1  # raw sonar: gamma 'scale' is ~15x 'auto'
        assert cell["changed_settings"] == ["task_model.params.gamma: auto -> scale"]
    assert cells["uniform"]["identical_queries"] == 8  # same pool order, other task model: AUBC still drifts
    summary = (out / "summary.md").read_text()
    assert "**DRIFT** (exit 1)" in summary and "`task_model.params.gamma` | auto | scale" in summary
    finding = next(line for line in summary.splitlines() if line.startswith("- **drift**: `us-c` on `sonar`"))
    assert "mean AUBC difference +0.0" in finding and "d_z +" in finding
    assert "task_model.params.gamma: auto -> scale" in finding
    junit = ET.parse(out / "junit.xml").getroot()
    validate(junit)
    failures = junit.findall("testsuite/testcase/failure")
    assert len(failures) == 2 and "gamma: auto -> scale" in failures[0].text
    assert json.loads((out / "gate.json").read_text())["counts"]["drift"] == 2


def test_an_unchanged_environment_gates_identical_and_shows_the_environment_diff(upgrade, capsys):
    baseline = json.loads(upgrade["baseline"].read_text())
    baseline["environment"]["scikit-learn"] = "1.5.2"  # as if the baseline came from an older scikit-learn
    edited = upgrade["root"] / "older-sklearn.json"
    edited.write_text(json.dumps(baseline))
    out = upgrade["root"] / "same"
    code = main(["gate", "--baseline", str(edited), "--protocol", str(upgrade["auto"]), "--out", str(out),
                 "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    report = json.loads((out / "gate.json").read_text())
    assert [c["verdict"] for c in report["cells"]] == ["identical", "identical"]
    assert report["protocol_changes"] == []  # the same spec from another file name
    assert {"key": "scikit-learn", "from": "1.5.2", "to": baseline_sklearn()} in report["environment"]["changes"]
    assert "| scikit-learn | 1.5.2 |" in printed and "**PASS** (exit 0): 2 identical" in printed
    validate(ET.parse(out / "junit.xml").getroot())


def baseline_sklearn():
    from importlib import metadata

    return metadata.version("scikit-learn")


def test_cli_baseline_create_and_gate_exit_codes(upgrade, tmp_path, capsys):
    suite_file = tmp_path / "one.toml"
    suite_file.write_text(SUITE.format(protocol=upgrade["auto"]).replace('["uniform", "us-c"]', '["us-c"]')
                          .replace("trials = 8", "trials = 3"))
    base = tmp_path / "b" / "one.json"
    base.parent.mkdir()  # a given --out needs an existing directory (issue 16 item 9)
    assert main(["baseline", "create", "--suite", str(suite_file), "--out", str(base), "--no-progress"]) == 0
    assert "3 trials" in capsys.readouterr().out and base.exists()
    out = tmp_path / "g"
    common = ["gate", "--baseline", str(base), "--out", str(out), "--no-progress"]
    changed = common + ["--protocol", str(upgrade["scale"])]
    assert main(changed) == 1  # us-c on raw sonar: about +0.06 AUBC
    assert "**drift**: `us-c` on `sonar`" in capsys.readouterr().out
    assert main(changed + ["--margin", "0.5"]) == 0  # a huge margin: equivalent
    assert "**PASS** (exit 0): 1 equivalent" in capsys.readouterr().out
    # three trials, mean inside a 0.07 margin, interval not: inconclusive passes unless --strict
    assert main(changed + ["--margin", "0.07"]) == 0
    assert "trials would decide it" in capsys.readouterr().out
    assert main(changed + ["--margin", "0.07", "--strict"]) == 2
    assert "**INCONCLUSIVE (strict)** (exit 2)" in capsys.readouterr().out
    assert ET.parse(out / "junit.xml").getroot().find("testsuite").get("errors") == "1"
    assert main(["gate", "--baseline", str(tmp_path / "nope.json")]) == 2
    assert "audit: error: cannot read baseline" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # the option's type refuses it while the command line is read
        main(common + ["--margin", "0"])
    assert refused.value.code == 2
    assert "argument --margin: must be a number between 0 and 1" in capsys.readouterr().err


def test_an_edited_baseline_is_refused(upgrade, tmp_path):
    baseline = json.loads(upgrade["baseline"].read_text())
    baseline["protocol"]["data"]["task_model"]["params"]["gamma"] = "scale"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(baseline))
    with pytest.raises(AuditError, match="does not hash to its recorded spec"):
        gate(edited, out=tmp_path / "g", progress=False, log=lambda _: None)
    with pytest.raises(AuditError, match="not an al-audit baseline"):
        (tmp_path / "x.json").write_text("{}")
        gate(tmp_path / "x.json", out=tmp_path / "g")


def test_the_committed_smoke_baseline_is_complete_and_rebuilds_its_protocol():
    path = Path(__file__).resolve().parent.parent / "reference_results" / "baselines" / "smoke.json"
    baseline = load_baseline(path)
    protocol = protocol_from_data(baseline["protocol"]["data"], baseline["protocol"]["spec_hash"])
    smoke = load_suite("smoke")
    assert baseline["suite"]["strategies"] == list(smoke.strategies) == list(protocol.strategies)
    assert list(baseline["datasets"]) == list(smoke.datasets)
    assert len(baseline["cells"]) == len(smoke.datasets) * len(smoke.strategies)
    assert all(len(c["trials"]) == smoke.trials and all(t["status"] == "ok" for t in c["trials"])
               for c in baseline["cells"])


@pytest.mark.slow
def test_the_smoke_suite_gates_identical_against_a_fresh_baseline(tmp_path, capsys):
    base = tmp_path / "smoke.json"
    assert main(["baseline", "create", "--suite", "smoke", "--out", str(base), "--jobs", "2", "--no-progress"]) == 0
    out = tmp_path / "gate"
    assert main(["gate", "--baseline", str(base), "--jobs", "2", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "gate.json").read_text())
    assert len(report["cells"]) == 21 and {c["verdict"] for c in report["cells"]} == {"identical"}


def test_the_ci_workflow_example_gates_the_committed_baseline_with_valid_arguments():
    import shlex

    import yaml

    from audit.cli.main import build_parser

    repo = Path(__file__).resolve().parent.parent
    workflow = yaml.safe_load((repo / "examples/ci/gate-upgrade.yml").read_text())
    steps = {step.get("name"): step for step in workflow["jobs"]["gate"]["steps"]}
    script = steps["Gate against the committed baseline"]["run"]
    command = re.search(r"audit (gate .*?--no-progress)", script.replace("\\\n", " "), re.S).group(1)
    args = build_parser().parse_args(shlex.split(command.replace('"$MARGIN"', "0.005")))
    assert (repo / args.baseline).is_file() and args.out == "gate-report"
    assert "summary.md" in steps["Publish the summary"]["run"]
    assert steps["Publish the JUnit report"]["with"]["report_paths"] == "gate-report/junit.xml"
