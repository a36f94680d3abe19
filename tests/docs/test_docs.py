"""The documentation, executed: every shell and python block of README.md and docs/*.md.

Blocks marked ``fast`` (and ``fails N``) run here in CI, ``slow`` ones with ``make test-slow``,
each in a working folder that is a copy of the repository, with the venv's commands first on
PATH. Every command runs as written, except for the placeholders a reader fills in (``<hash>``,
``RUN_DIR``, hub model ids, which become tiny local models without hub revisions) and for the environment variable
``WINDTUNNEL_FORCE_SET``, which cuts training, evaluation and LLM runs to seconds. A block
without a marker fails :func:`test_every_block_is_marked` (see ``docblocks.py``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docblocks import ROOT, SHELL, Block, all_blocks
from typer.testing import CliRunner

from windtunnel.cli import app

BLOCKS = all_blocks()
BIN = Path(sys.executable).parent

# what a reader fills in, and what the test fills in instead
PLACEHOLDERS = {"RUN_DIR": "runs/bijection-transformer-<hash>"}
HUB_MODELS = {  # hub id -> tiny family model of tests/llm/llm_tiny.py
    "EleutherAI/pythia-410m": "gpt_neox",
    "microsoft/phi-2": "phi",
    "meta-llama/Llama-3.2-1B": "llama",
    "mistralai/Mistral-7B-v0.1": "mistral",
    "./my-checkpoint": "llama",
}
HUB_ONLY = ["--init-revision step0", 'init_revision="step0", ']  # a revision exists only on the hub
FORCE = {
    "WINDTUNNEL_FORCE_SET": " ".join([
        "train.steps=3", "train.batch_size=8", "train.threads=1", "train.checkpoints=1", "train.eval_probe_size=8",
        "eval.n_sequences=16", "eval.n_boot=10", "eval.batch_size=16",
        "llm.n_bootstrap=10", "llm.n_null=10", "llm.n_per_quintile=2", "llm.sula_n_per_k=2", "llm.batch_size=32",
        "llm.plots=false",
    ]),
    "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1",
}
TIMEOUT = {"fast": 120, "slow": 1800}  # slow: a scorecard block tunes and scores every rung (~150 runs of 3 steps)


def _id(b: Block) -> str:
    return b.name


def _runnable(kind: str) -> list[Block]:
    """Blocks with at least one command of this speed ('fails' counts as fast)."""
    want = {"fast", "fails"} if kind == "fast" else {"slow"}
    return [b for b in BLOCKS if not b.error and b.kinds() & want]


def test_every_block_is_marked():
    bad = [f"{b.name}: {b.error}" for b in BLOCKS if b.error]
    assert not bad, "docs blocks without a valid marker:\n" + "\n".join(bad)


def test_help_of_every_command(workdir):
    import typer.main

    names = sorted(typer.main.get_command(app).commands)
    assert {"tasks", "sample", "train", "eval", "run", "sweep", "report", "diagnose", "llm"} <= set(names)
    for cmd in ([], *([n] for n in names)):
        res = CliRunner().invoke(app, [*cmd, "--help"])
        assert res.exit_code == 0 and "Usage" in res.output, (cmd, res.output)


# The blocks run in order in one working folder (a block reads what an earlier one wrote): under
# pytest -n, `--dist loadfile` (the Makefile's) keeps this file on one worker.
@pytest.mark.parametrize("block", _runnable("fast"), ids=_id)
def test_fast_block(block, workdir):
    _skip_without_extras(block)
    _run_block(block, workdir, {"fast", "fails"})


@pytest.mark.slow
@pytest.mark.parametrize("block", _runnable("slow"), ids=_id)
def test_slow_block(block, workdir, slow_fixtures):
    _skip_without_extras(block)
    _run_block(block, workdir, {"fast", "fails", "slow"})


def _skip_without_extras(block: Block) -> None:
    """A block that needs an optional extra skips without it (fast and slow blocks alike)."""
    for needle, module in EXTRAS_NEEDED:
        if needle in block.body:
            pytest.importorskip(module)


# (text in a block, the module of the optional extra it needs): see pyproject's extras
EXTRAS_NEEDED = [("transformer_lens", "transformer_lens"), ("interop.transformerlens", "transformer_lens"),
                 ("--to transformerlens", "transformer_lens"),
                 ("nnsight", "nnsight"), ("--log tensorboard", "tensorboard"), ("--log mlflow", "mlflow"),
                 ("--log wandb", "wandb"), ("import mlflow", "mlflow"), ("import wandb", "wandb"),
                 ("from tensorboard", "tensorboard"), ("windtunnel.results(", "pandas")]


# ---------------------------------------------------------------------------------------
# Fixtures: the working folder, a trained run, tiny local language models
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """A copy of the repository's tracked files (no venv, no runs), with the docs' data files."""
    out = tmp_path_factory.mktemp("docs") / "repo"
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0:
        for rel in git.stdout.splitlines():
            if (ROOT / rel).is_file():
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, out / rel)
    else:  # not a git checkout
        shutil.copytree(ROOT, out, ignore=shutil.ignore_patterns(".git", ".venv", "runs", "__pycache__", "*.egg-info"))
    for b in BLOCKS:
        if b.kind == "file":
            (out / b.clauses[0].name).write_text(b.body + "\n")
    return out


@pytest.fixture(scope="session")
def slow_fixtures(workdir) -> Path:
    """What the slow blocks assume a reader has: a trained bijection transformer in runs/ and,
    in place of hub models, tiny randomly initialised ones saved to local folders."""
    if not glob.glob(str(workdir / "runs" / "bijection-transformer-*")):
        _sh("windtunnel train --task bijection --model transformer --quiet", workdir)
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "tests" / "llm"))
    from llm_tiny import build_model, build_tokenizer

    models = workdir / "tiny-models"
    if not models.exists():
        tok = build_tokenizer(models / "tokenizer")
        for family in sorted(set(HUB_MODELS.values())):
            build_model(family, models / family, len(tok))
            tok.save_pretrained(models / family)
    return workdir


# ---------------------------------------------------------------------------------------
# Running a block
# ---------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **FORCE}


def _substitute(text: str, workdir: Path, shell: bool) -> str:
    for name, value in PLACEHOLDERS.items():
        text = re.sub(rf"\b{name}\b", value, text)
    for hub, family in HUB_MODELS.items():
        if hub in text:
            text = text.replace(hub, str(workdir / "tiny-models" / family))
            for option in HUB_ONLY:
                text = text.replace(option, "")

    def resolve(m: re.Match) -> str:  # the newest match: the run an earlier command just made
        pattern = m[0].replace("<hash>", "*")
        if shell:
            return f'"$(ls -td {pattern} | head -1)"'
        hits = sorted(glob.glob(str(workdir / pattern)), key=os.path.getmtime)
        assert hits, f"{m[0]} matches nothing in {workdir}"
        return hits[-1]

    return re.sub(r"[\w./-]*<hash>[\w./-]*", resolve, text)


def _windtunnel_argv(text: str) -> list[str] | None:
    """The arguments of a plain ``windtunnel ...`` command (no shell syntax), else None."""
    try:
        argv = shlex.split(text, comments=True)
    except ValueError:
        return None
    plain = text.split("#")[0]
    if not argv or argv[0] != "windtunnel" or any(ch in plain.replace("<hash>", "") for ch in "$|;&`<>"):
        return None
    return argv[1:]


@contextlib.contextmanager
def _in(folder: Path):
    """Run in ``folder`` with the environment of a docs command (restored afterwards)."""
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(folder)
    os.environ.update(FORCE)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)


def _sh(script: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    res = subprocess.run(["bash", "-c", script], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{script}\nexit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _run_block(block: Block, workdir: Path, kinds: set[str]) -> None:
    timeout = TIMEOUT["slow" if "slow" in kinds else "fast"]
    if block.lang not in SHELL:
        source = _substitute(block.body, workdir, shell=False)
        res = subprocess.run([sys.executable, "-c", source], cwd=workdir, env=_env(), capture_output=True,
                             text=True, timeout=timeout)
        assert res.returncode == 0, f"{block.name}: python block failed\n{source}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        return
    selected = [c for c in block.commands if c.kind in kinds]
    assert selected
    # only `windtunnel ...` commands: in this process, without starting Python each time
    if all(_windtunnel_argv(c.text) is not None for c in selected):
        for cmd in selected:
            # without its comment, which is prose: a placeholder there names a run not yet made
            text = shlex.join(shlex.split(cmd.text, comments=True))
            argv = _windtunnel_argv(_substitute(text, workdir, shell=False))
            with _in(workdir):
                res = CliRunner().invoke(app, argv)
            if res.exit_code != cmd.clause.code:
                pytest.fail(f"{block.path.name}:{cmd.line}: `{cmd.text}` exited {res.exit_code}, expected "
                            f"{cmd.clause.code}\n{res.output[-3000:]}\n{res.exception!r}")
        return
    # one bash script, so that a command sees the variables of the earlier ones; each command's
    # exit code is checked right after it
    lines = []
    for i, cmd in enumerate(block.commands):
        if cmd.kind not in kinds:
            continue
        lines += [_substitute(cmd.text, workdir, shell=True),
                  f'__rc=$?; if [ "$__rc" != {cmd.clause.code} ]; then '
                  f'echo "__docs__ command {i} exited $__rc, expected {cmd.clause.code}" >&2; exit 97; fi']
    res = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=workdir, env=_env(), capture_output=True, text=True,
                         timeout=timeout)
    failed = re.search(r"__docs__ command (\d+) exited (\d+), expected (\d+)", res.stderr)
    if failed:
        cmd = block.commands[int(failed[1])]
        pytest.fail(f"{block.path.name}:{cmd.line}: `{cmd.text}` exited {failed[2]}, expected {failed[3]}\n"
                    f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}")
    assert res.returncode == 0, f"{block.name}: exit {res.returncode}\n{res.stderr[-3000:]}"


def test_a_command_that_does_not_do_what_its_marker_says_fails(tmp_path):
    doc = ("<!-- docs: fast -->\n```bash\nwindtunnel sample bijection --V 1\n```\n\n"
           "<!-- docs: fails 2 -->\n```bash\nwindtunnel sample bijection --V 3 --L 2 --n 1\n```\n\n"
           "<!-- docs: fast -->\n```bash\nX=1; test \"$X\" = 2\n```\n\n"
           "<!-- docs: fast -->\n```python\nraise SystemExit(3)\n```\n")
    from docblocks import parse_blocks

    expected = ["`windtunnel sample bijection --V 1` exited 2, expected 0",
                "`windtunnel sample bijection --V 3 --L 2 --n 1` exited 0, expected 2",
                "exited 1, expected 0", "python block failed"]
    for block, message in zip(parse_blocks(tmp_path / "d.md", doc), expected, strict=True):
        with pytest.raises(pytest.fail.Exception if "python" not in message else AssertionError, match=message):
            _run_block(block, tmp_path, {"fast", "fails"})


def test_a_placeholder_in_a_comment_is_prose(tmp_path):
    """A `<hash>` in a command's comment names what the command will make: it is not resolved."""
    from docblocks import parse_blocks

    doc = "<!-- docs: fast -->\n```bash\nwindtunnel tasks   # lists the tunnels; nothing in runs/x-<hash>/ yet\n```\n"
    (block,) = parse_blocks(tmp_path / "d.md", doc)
    _run_block(block, tmp_path, {"fast"})
