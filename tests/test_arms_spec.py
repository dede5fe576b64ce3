"""Arm declarations (config.yaml ``arms:``) and selection (``--arm``, ``--perturb``, ``--control``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from glasskit_eval.arms.perturb import Perturbation
from glasskit_eval.arms.spec import CONTROL, ArmSpec, select_arms
from glasskit_eval.cases.evaldir import load_eval_config
from glasskit_eval.errors import UsageError

DECLARED = {"small": ArmSpec("small", adapter_config={"model": "small"}),
            "large": ArmSpec("large", adapter_config={"model": "large"}),
            "dim": ArmSpec("dim", perturb=(Perturbation("brightness", 0.4),))}


def test_no_arm_options_is_a_plain_run() -> None:
    assert select_arms(DECLARED, [], [], None) is None


def test_declared_arms_follow_the_plain_control_in_command_line_order() -> None:
    selection = select_arms(DECLARED, ["large", "small"], [], None)
    assert selection is not None
    assert selection.names == (CONTROL, "large", "small")
    assert selection.control == CONTROL
    assert selection.arms[1].adapter_config == {"model": "large"}


def test_all_selects_every_declared_arm_once() -> None:
    selection = select_arms(DECLARED, ["small", "all"], [], None)
    assert selection is not None and selection.names == (CONTROL, "small", "large", "dim")


def test_perturb_arms_are_named_by_their_spec_and_chain_with_plus() -> None:
    selection = select_arms({}, [], ["jpeg:30", "brightness:0.4+noise:8"], None)
    assert selection is not None
    assert selection.names == (CONTROL, "jpeg:30", "brightness:0.4+noise:8")
    assert selection.arms[2].perturb == (Perturbation("brightness", 0.4), Perturbation("noise", 8.0))
    assert selection.arms[1].is_perturbation and not selection.arms[0].is_perturbation


def test_name_equals_path_is_an_adapter_config_arm() -> None:
    selection = select_arms({}, ["fast=/abs/fast.yaml"], [], None)
    assert selection is not None
    assert selection.arms[1] == ArmSpec("fast", adapter_config_path="/abs/fast.yaml")


def test_control_names_a_selected_arm_and_the_plain_adapter_runs_only_when_selected() -> None:
    selection = select_arms(DECLARED, ["small", "large"], [], "small")
    assert selection is not None and selection.names == ("small", "large") and selection.control == "small"
    with_plain = select_arms(DECLARED, ["small", "large", "control"], [], "small")
    assert with_plain is not None and with_plain.names == ("small", CONTROL, "large")


@pytest.mark.parametrize(("arms", "perturbs", "control", "message"), [
    (["smal"], [], None, "--arm smal: unknown arm; did you mean 'small'?"),
    (["small", "small"], [], None, "arm 'small' is selected twice"),
    (["small", "large"], [], "larg", "--control larg: not a selected arm; did you mean 'large'?"),
    ([], ["jepg:30"], None, "unknown perturbation 'jepg'; did you mean 'jpeg'?"),
    ([], ["jpeg:300"], None, "jpeg takes a JPEG quality from 1 to 95"),
    (["all=x.yaml"], [], None, "'all' is reserved"),
    (["fast="], [], None, "give the adapter config file after '='"),
    (["small"], [], "large", "--control large: the arm is declared but not selected; add --arm large"),
])
def test_bad_selections_name_the_option(arms: list[str], perturbs: list[str], control: str | None,
                                        message: str) -> None:
    with pytest.raises(UsageError) as caught:
        select_arms(DECLARED, arms, perturbs, control)
    assert message in str(caught.value)


def test_all_without_declarations_says_what_to_add() -> None:
    with pytest.raises(UsageError, match="declares no arms"):
        select_arms({}, ["all"], [], None)


def _config(tmp_path: Path, text: str) -> tuple[dict[str, ArmSpec], list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    config, problems = load_eval_config(path)
    return dict(config.arms), [str(p) for p in problems]


def test_config_arms_parse_with_paths_relative_to_the_eval_dir(tmp_path: Path) -> None:
    arms, problems = _config(tmp_path, """\
        arms:
          small: {adapter_config: {model: small}}
          large: {adapter_config: configs/large.yaml}
          node: {adapter_command: "node adapter.mjs"}
          low_light: {perturb: [{brightness: 0.4}, {noise: 8}]}
        """)
    assert problems == []
    assert arms["small"].adapter_config == {"model": "small"}
    assert arms["large"].adapter_config_path == str(tmp_path / "configs" / "large.yaml")
    assert arms["node"].adapter_command == "node adapter.mjs"
    assert arms["low_light"].perturb == (Perturbation("brightness", 0.4), Perturbation("noise", 8.0))
    assert arms["low_light"].to_json() == {"perturb": "brightness:0.4+noise:8"}


def test_config_arm_problems_are_located(tmp_path: Path) -> None:
    arms, problems = _config(tmp_path, """\
        arms:
          ok: {perturb: [{blur: 2}]}
          control: {perturb: [{blur: 2}]}
          both: {adapter: a.py:f, adapter_command: "node x.mjs"}
          typo: {adapter_confg: {}}
          badkind: {perturb: [{blurr: 2}]}
          empty: {}
        """)
    assert list(arms) == ["ok"]
    text = "\n".join(problems)
    assert "config.yaml:3" in text and "reserved" in text
    assert "config.yaml:4" in text and "mutually exclusive" in text
    assert "config.yaml:5" in text and "unknown key 'adapter_confg'" in text
    assert "config.yaml:6" in text and "did you mean 'blur'" in text
    assert "config.yaml:7" in text and "changes nothing" in text
