"""Property tests of every parser that sees user input: a result or a UsageError, never a
crash, and every result is safe (a parsed app id stays inside the store).

Examples per test: a few dozen in the default tier, hundreds in the slow tier (the same test
bodies; the slow copies are at the bottom).
"""

from __future__ import annotations

import math
import re
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.fuzz_strategies import examples, hostile_text, json_values
from trainlaunch.errors import UsageError
from trainlaunch.handles import AppHandle, LogTarget, parse_app_handle, parse_log_target
from trainlaunch.options import runopts

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
SAFE_SESSION = re.compile(r"[A-Za-z0-9_.-]*")
SAFE_SCHEDULER = re.compile(r"[a-z][a-z0-9_]*")
STORE = Path("/nonexistent-store/apps")


def handle_texts() -> st.SearchStrategy[str]:
    parts = hostile_text(max_size=4)
    structured = st.builds(
        lambda s, sess, app: f"{s}://{sess}/{app}",
        st.sampled_from(["local", "slurm", "kubernetes", "Local", "x_1", ""]) | parts,
        parts,
        parts,
    )
    return st.one_of(hostile_text(), structured, st.text())


def check_handle(text: str) -> AppHandle | None:
    try:
        h = parse_app_handle(text)
    except UsageError:
        return None
    assert isinstance(h, AppHandle)
    assert SAFE_SCHEDULER.fullmatch(h.scheduler), h
    assert SAFE_SESSION.fullmatch(h.session), f"session {h.session!r} from {text!r}"
    assert SAFE_ID.fullmatch(h.app_id) and ".." not in h.app_id, f"{h.app_id!r} from {text!r}"
    # the property the store relies on: the id is one path component inside apps/
    path = (STORE / h.app_id).resolve()
    assert path.parent == STORE and path.name == h.app_id, (text, path)
    assert parse_app_handle(str(h)) == h, "a printed handle must parse back to itself"
    return h


def handle_prop(text: str) -> None:
    check_handle(text)


def log_target_prop(text: str) -> None:
    try:
        t = parse_log_target(text)
    except UsageError:
        return
    assert isinstance(t, LogTarget)
    check_handle(str(t.handle))
    if t.role is not None:
        assert t.role and "/" not in t.role
    if t.replicas is not None:
        assert t.replicas and all(isinstance(r, int) and r >= 0 for r in t.replicas)
        assert list(t.replicas) == sorted(set(t.replicas))


def _schema() -> runopts:
    opts = runopts()
    opts.add("name", str, "a string")
    opts.add("count", int, "an int", default=1)
    opts.add("ratio", float, "a float")
    opts.add("flag", bool, "a bool", default=False)
    opts.add("items", list, "a list")
    opts.add("labels", dict, "a dict")
    return opts


SCHEMA = _schema()
_TYPES = {"name": str, "count": int, "ratio": float, "flag": bool, "items": list, "labels": dict}


def cfg_texts() -> st.SearchStrategy[str]:
    key = st.sampled_from([*_TYPES, "nosuch", "", " count ", "Count"]) | st.text(max_size=4)
    value = hostile_text(
        [
            "'",
            '"',
            ";",
            ":",
            "=",
            ",",
            "true",
            "no",
            "1",
            "-3",
            "1.5",
            "nan",
            "inf",
            "1e400",
            "0x10",
            "1_000",
            " ",
            "a",
            "k:v",
            "k=v",
        ],
        max_size=6,
    )
    pair = st.builds(lambda k, eq, v: f"{k}{eq}{v}", key, st.sampled_from(["=", "", "=="]), value)
    return st.one_of(st.lists(pair, max_size=5).map(",".join), st.text(max_size=40))


def cfg_prop(text: str) -> None:
    try:
        cfg = SCHEMA.cfg_from_str(text, "fuzz")
    except UsageError:
        return
    assert set(cfg) <= set(_TYPES)
    for k, v in cfg.items():
        assert isinstance(v, _TYPES[k]) and not (k == "count" and isinstance(v, bool)), (k, v)
        if k == "items":
            assert all(isinstance(x, str) for x in v)  # type: ignore[union-attr]
        if k == "labels":
            assert all(isinstance(a, str) and isinstance(b, str) for a, b in v.items())  # type: ignore[union-attr]
    # what was parsed resolves (the second half of `--cfg` handling)
    resolved = SCHEMA.resolve(cfg, "fuzz")
    assert set(resolved) == set(_TYPES)


def resolve_prop(cfg: dict[str, Any]) -> None:
    try:
        out = SCHEMA.resolve(cfg, "fuzz")
    except UsageError:
        return
    for k, v in out.items():
        assert v is None or isinstance(v, _TYPES[k]), (k, v)


def _utils_components() -> list[str]:
    from trainlaunch.resolver import list_components

    return [n for n, _ in list_components() if n.startswith("utils.")]


UTILS = _utils_components()


def argv_for(component: str) -> st.SearchStrategy[list[str]]:
    from trainlaunch.resolver import find_component

    spec = find_component(component).spec()
    flags = sorted(spec.lookup) + ["--", "-h", "--help", "--no-such", "-", "-x"]
    values = hostile_text(
        [
            "1",
            "0",
            "-1",
            "2.5",
            "nan",
            "inf",
            "1e400",
            "true",
            "no",
            "APPLICATION",
            "REPLICA",
            "ROLE",
            "A=1",
            "A=1,B=2",
            "=x",
            ",",
            "",
            "a,b",
            "train.py",
            "-m",
            "x.y",
            "9" * 30,
        ],
        max_size=4,
    )
    flag_eq = st.builds(lambda f, v: f"{f}={v}", st.sampled_from(flags), values)
    return st.lists(st.one_of(st.sampled_from(flags), values, flag_eq), max_size=8)


def materialize_prop(component: str, argv: list[str]) -> None:
    from trainlaunch.resolver import HelpRequested, find_component
    from trainlaunch.specs import AppDef

    try:
        app = find_component(component).materialize(argv)
    except HelpRequested as h:
        assert h.text.strip()
        return
    except UsageError:
        return
    assert isinstance(app, AppDef)
    for role in app.roles:
        assert role.num_replicas >= 1 and all(isinstance(a, str) for a in role.args)


# --- config files -------------------------------------------------------------------------


def _toml_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0xD800 or ord(ch) > 0xDFFF else "?")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


toml_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=10),
    st.sampled_from(
        [
            "local",
            "slurm",
            "k8s",
            "all_ranks",
            "sampled",
            "pkg:name",
            "",
            "utils.echo",
            "10",
            "true",
        ]
    ),
)
toml_values = st.recursive(
    toml_scalars,
    lambda c: st.one_of(
        st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)
    ),
    max_leaves=6,
)
RUN_KEYS = [
    "scheduler",
    "seed",
    "export_strategy",
    "export_rank",
    "export_sample_rate",
    "metrics_path",
    "nosuch",
]
SCHED_KEYS = ["cwd", "grace_period", "auto_set_cuda_visible_devices", "gpu_count", "nosuch"]
COMP_KEYS = ["msg", "num_replicas", "env", "image", "args", "nosuch", "--msg"]


def toml_docs() -> st.SearchStrategy[str]:
    run = st.dictionaries(st.sampled_from(RUN_KEYS) | st.text(max_size=5), toml_values, max_size=4)
    sched = st.dictionaries(
        st.sampled_from(["local", "k8s", "slurm", "nosuch"]),
        st.dictionaries(st.sampled_from(SCHED_KEYS), toml_values, max_size=3) | toml_scalars,
        max_size=2,
    )
    comp = st.dictionaries(
        st.sampled_from(["utils.echo", "utils.sh", "echo", "dist.ddp"]),
        st.dictionaries(st.sampled_from(COMP_KEYS), toml_values, max_size=3) | toml_scalars,
        max_size=2,
    )
    top = st.fixed_dictionaries(
        {}, optional={"run": run, "scheduler": sched, "component": comp, "nosuch": toml_values}
    )

    def render(doc: dict[str, Any]) -> str:
        return "\n".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in doc.items())

    return st.one_of(
        top.map(render),
        st.text(alphabet=string.printable, max_size=80),
        hostile_text(
            [
                "[run]",
                "[scheduler.local]",
                '[component."utils.echo"]',
                "=",
                "\n",
                "seed = 1",
                '"',
                "[",
                "]",
                "{",
                "}",
                "#",
                "[[run]]",
                "'''",
                '"""',
            ],
            max_size=10,
        ),
    )


def config_prop(tmp: Path, text: str, as_pyproject: bool) -> None:
    from trainlaunch.config import load_config

    proj = tmp / "proj"
    (proj / ".git").mkdir(parents=True, exist_ok=True)
    for old in ("pyproject.toml", ".trainlaunch.toml"):
        (proj / old).unlink(missing_ok=True)
    if as_pyproject:
        body = text.replace("\n", "\n")  # the same document under [tool.trainlaunch]
        (proj / "pyproject.toml").write_text(
            "[tool.trainlaunch]\n" + body, encoding="utf-8", errors="surrogatepass"
        )
    else:
        (proj / ".trainlaunch.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    env = {"XDG_CONFIG_HOME": str(tmp / "xdg"), "HOME": str(tmp)}
    try:
        cfg = load_config(cwd=str(proj), environ=env)
        cfg.default_scheduler()
        cfg.scheduler_cfg("local")
        cfg.scheduler_cfg("k8s")
        cfg.component_defaults("utils.echo")
        cfg.run_settings({})
        cfg.run_settings_with_origin({"seed": 3})
    except UsageError:
        return


# --- the tests -----------------------------------------------------------------------------
# Each property runs twice: a quick pass in the default tier, a long one marked slow.

HANDLE_EDGES = [
    "local://s\n/abc",
    "local\n://s/abc",
    "local://\n/abc",
    "local://s/abc\n",
    "local://trainlaunch/a\u0660",
    "local://s\t/abc",
    "abc\n",
]


def _handle_test(n: int) -> Any:
    @examples(n)
    @given(handle_texts())
    def test(text: str) -> None:
        handle_prop(text)

    for e in HANDLE_EDGES:
        test = example(e)(test)
    return test


def _log_target_test(n: int) -> Any:
    @examples(n)
    @given(
        st.one_of(
            handle_texts(),
            st.builds(
                lambda h, rest: h + rest,
                handle_texts(),
                hostile_text(["/", ",", "0", "1", "-1", "trainer", "..", ""]),
            ),
        )
    )
    def test(text: str) -> None:
        log_target_prop(text)

    for e in [*HANDLE_EDGES, "abc/role\n", "abc/r/0\n", "abc/r/\u0661"]:
        test = example(e)(test)
    return test


def _cfg_test(n: int) -> Any:
    @examples(n)
    @given(cfg_texts())
    @example("count=\u0661\u0662")  # int() accepts unicode digits
    @example("ratio=1_0,count=1_000")
    def test(text: str) -> None:
        cfg_prop(text)

    return test


def _resolve_test(n: int) -> Any:
    @examples(n)
    @given(
        st.dictionaries(
            st.sampled_from([*_TYPES, "nosuch"]), json_values(6) | st.floats(), max_size=6
        )
    )
    def test(cfg: dict[str, Any]) -> None:
        resolve_prop(cfg)

    return test


def _component_test(n: int) -> Any:
    @pytest.mark.parametrize("component", UTILS)
    @examples(n)
    @given(data=st.data())
    def test(component: str, data: st.DataObject) -> None:
        materialize_prop(component, data.draw(argv_for(component)))

    return test


def _config_test(n: int) -> Any:
    @examples(n)
    @given(text=toml_docs(), as_pyproject=st.booleans())
    def test(tmp_path_factory: pytest.TempPathFactory, text: str, as_pyproject: bool) -> None:
        config_prop(tmp_path_factory.getbasetemp() / "cfgfuzz", text, as_pyproject)

    return test


test_parse_app_handle = _handle_test(100)
test_parse_log_target = _log_target_test(100)
test_cfg_from_str = _cfg_test(60)
test_runopts_resolve = _resolve_test(40)
test_component_argv = _component_test(15)
test_load_config = _config_test(40)

test_parse_app_handle_long = pytest.mark.slow(_handle_test(1500))
test_parse_log_target_long = pytest.mark.slow(_log_target_test(1500))
test_cfg_from_str_long = pytest.mark.slow(_cfg_test(1500))
test_runopts_resolve_long = pytest.mark.slow(_resolve_test(800))
test_component_argv_long = pytest.mark.slow(_component_test(200))
test_load_config_long = pytest.mark.slow(_config_test(600))


def test_utils_components_were_found() -> None:
    assert {"utils.echo", "utils.sh", "utils.python", "utils.binary"} <= set(UTILS)


def test_known_inputs_still_parse() -> None:
    """The properties above would hold trivially for a parser that rejects everything."""
    assert check_handle("local://trainlaunch/echo-abc") == AppHandle(
        "local", "trainlaunch", "echo-abc"
    )
    assert check_handle("echo-abc") is not None
    assert SCHEMA.cfg_from_str("name='a,b',items=x;y,labels=k:v", "fuzz") == {
        "name": "a,b",
        "items": ["x", "y"],
        "labels": {"k": "v"},
    }
    from trainlaunch.resolver import find_component

    app = find_component("utils.sh").materialize(["--num-replicas", "2", "echo", "hi"])
    assert app.roles[0].num_replicas == 2
