"""The warning that a request exceeds the context (prompt + output > max_model_len): it names
a request the user described, never the defaults (a prompt left to follow the context)."""

from __future__ import annotations

import pytest

from capacity.cli.main import main
from capacity.model.workload import Workload

SIZE = ["size", "--dau", "500", "--requests-per-user", "20", "--peak-share", "0.3",
        "--peak-hours", "2", "--ctx", "8192", "--output-tokens", "256", "--slo-ttft-ms", "2000",
        "--slo-tpot-ms", "50", "--model", "qwen3.5-9b-awq", "--gpus", "rtx-4090,h100-sxm",
        "--max-gpus", "4"]


def test_a_prompt_given_apart_and_its_output_over_the_context_warn() -> None:
    assert Workload(daily_active_users=500, context_tokens=8192, prompt_tokens=8000,
                    output_tokens=256).tokens_over_context == 8256
    assert Workload(daily_active_users=500, context_tokens=8192, prompt_tokens=7936,
                    output_tokens=256).tokens_over_context == 0  # exactly the context
    # no prompt given: it follows the context (TTFT for a prompt as long as the context)
    assert Workload(daily_active_users=500, context_tokens=8192,
                    output_tokens=256).tokens_over_context == 0


def test_the_readme_size_command_does_not_warn_against_its_own_inputs(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SIZE) == 0
    assert "warning: prompt + output" not in capsys.readouterr().err
    assert main([*SIZE, "--prompt-tokens", "8000"]) == 0
    assert "warning: prompt + output = 8,256 tokens exceed the 8,192-token context" in \
        capsys.readouterr().err
