"""logmerge: who wrote a line, urgent lines, merging with a bounded window (pure, fake clocks)."""

from __future__ import annotations

import pytest

from trainlaunch import specs
from trainlaunch.logmerge.merge import FUZZY, Merger
from trainlaunch.logmerge.ranks import TeeFormat, Writer, prefix_pattern, relabel, tee_format
from trainlaunch.logmerge.urgent import Urgency
from trainlaunch.logmerge.view import ViewOptions, view


def agent_role(*flags: str, env: dict[str, str] | None = None) -> specs.Role:
    args = (*specs.NODE_AGENT_ARGS, *flags, "train.py")
    return specs.Role("train", "python", args=args, env=env or {}, node_agent=True)


def test_the_tee_prefix_names_the_global_rank_from_the_node_and_local_rank() -> None:
    fmt = tee_format(agent_role("--nnodes", "2", "--nproc-per-node", "4", "--tee", "3"), 1, {})
    who, text = fmt.split("[default2]:loss 0.41")
    assert (who.rank, who.local_rank, text) == (6, 2, "loss 0.41")
    assert who.label() == "[train/1 rank 6]"
    assert fmt.split("[trainlaunch] restarting") == (Writer("train", 1), "[trainlaunch] restarting")
    assert [w.rank for w in fmt.writers()] == [4, 5, 6, 7]


def test_no_tee_no_ranks_and_elastic_ranks_are_local() -> None:
    assert tee_format(agent_role("--tee", "0"), 0, {}).pattern is None
    plain = specs.Role("echo", "echo")
    assert tee_format(plain, 3, {}).split("hi") == (Writer("echo", 3), "hi")
    elastic = tee_format(agent_role("--nnodes", "1:2", "--tee", "3"), 1, {})
    who, _ = elastic.split("[default0]:x")
    assert (who.rank, who.label()) == (None, "[train/1 local rank 0]")


def test_a_template_of_the_users_is_read_back() -> None:
    env = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "<${role_name}|${rank}|${local_rank}> "}
    fmt = tee_format(agent_role("--role", "w", "--tee", "3"), 0, env)
    assert fmt.split("<w|5|1> hello")[0].rank == 5
    assert fmt.literal_prefix(0) is None  # the bulk copy needs torchrun's own prefix
    assert prefix_pattern("[${rank}]", "x").match("[12]") is not None


def test_relabel_rewrites_whole_lines_and_leaves_empty_ones_bare() -> None:
    table = {b"[default0]:": b"[t/0 rank 0] ", b"[default1]:": b"[t/0 rank 1] "}
    got = relabel(b"note\n[default0]:a\n[default0]:\n[default0]:\n\n[default1]:b\n", b"t/0 ", table)
    assert got == b"t/0 note\n[t/0 rank 0] a\n\n\n\n[t/0 rank 1] b\n"


def W(rank: int) -> Writer:  # noqa: N802
    return Writer("t", rank // 4, rank, rank % 4)


def test_a_line_every_rank_wrote_comes_out_once_as_soon_as_the_last_copy_arrives() -> None:
    m = Merger([W(r) for r in range(4)], window=0.5)
    assert m.feed(W(0), "Epoch 3", 0.0) == []
    assert m.feed(W(2), "Epoch 3", 0.1) == [] and m.feed(W(1), "Epoch 3", 0.1) == []
    [line] = m.feed(W(3), "Epoch 3", 0.2)
    assert (line.text, line.ranks, line.label()) == ("Epoch 3", (0, 1, 2, 3), "[t/0 ranks 0-3]")


def test_lines_come_out_in_first_copy_order_within_the_window() -> None:
    m = Merger([W(r) for r in range(8)], window=0.5)
    m.feed(W(0), "loss 1", 0.0)
    m.feed(W(1), "warn", 0.1, urgent=True)
    assert m.feed(W(2), "warn", 0.2) == []
    assert [x.text for x in m.due(0.5)] == ["loss 1"]  # the head: 0.5 old
    [warn] = m.due(0.6)  # 0.5 after its first copy, not later
    assert (warn.ranks, warn.urgent, warn.label()) == ((1, 2), True, "[t/0 ranks 1-2]")
    assert m.next_due() is None


def test_the_kth_copy_of_each_rank_meets_the_others_kth() -> None:
    m = Merger([W(0), W(1)], window=10)
    out = [*m.feed(W(0), "step", 0), *m.feed(W(0), "step", 1), *m.feed(W(1), "step", 2)]
    out += m.feed(W(1), "step", 3)
    assert [x.ranks for x in out] == [(0, 1), (0, 1)]


def test_a_late_copy_is_shown_on_its_own_never_dropped() -> None:
    m = Merger([W(0), W(1), W(2)], window=0.5)
    m.feed(W(0), "x", 0.0)
    m.feed(W(1), "x", 0.1)
    assert [x.ranks for x in m.due(0.6)] == [(0, 1)]
    assert m.feed(W(2), "x", 5.0) == [] and [x.ranks for x in m.flush()] == [(2,)]


def test_fuzzy_collapses_numbers_into_ranges() -> None:
    m = Merger([W(r) for r in range(3)], window=1, mode=FUZZY)
    for r, loss in enumerate(("0.44", "0.41", "0.43")):
        out = m.feed(W(r), f"step 7 loss {loss}", 0)
    assert [x.text for x in out] == ["step 7 loss 0.41..0.44"]
    with pytest.raises(ValueError):
        Merger([], 1, mode="close")


def test_urgent_lines_tracebacks_warnings_and_prompts() -> None:
    u = Urgency()
    lines = [
        ("[rank1]: Traceback (most recent call last):", True),
        ('[rank1]:   File "train.py", line 3, in <module>', True),
        ("[rank1]: ValueError: boom", True),
        ("loss 0.4", False),
        ("train.py:5: UserWarning: old", True),
        ('  warnings.warn("old")', True),
        ("  an indented line on its own", False),
        ("(Pdb) ", True),
    ]
    assert [u(1, text) for text, _ in lines] == [want for _, want in lines]
    assert u(2, "Epoch 3") is False


def test_view_keeps_one_rank_and_every_ranks_errors() -> None:
    fmt = TeeFormat("t", 0, prefix_pattern(None, "default"), 2, default_prefix="default")
    lines = ["[default0]:a", "[default1]:b", "[default1]:RuntimeError: bad", "note"]
    shown = view(
        ((0, fmt, ln) for ln in lines), [fmt], ViewOptions(ranks=frozenset({0})), clock=lambda: 0
    )
    assert [(m.text, m.writers[0].rank) for _, m in shown] == [
        ("a", 0),
        ("RuntimeError: bad", 1),
        ("note", None),
    ]
