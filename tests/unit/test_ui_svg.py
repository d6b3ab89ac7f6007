"""The web page's charts (cli/ui/svg.py): pure SVG text from series and dots, read back as XML."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from trainlaunch.cli.extras import install_hint
from trainlaunch.cli.ui import svg

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(text: str) -> ET.Element:
    root = ET.fromstring(text)  # well-formed, or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "style=" not in text  # the page's CSP refuses inline styles
    return root


def coords(polyline: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.get("points", "").split()]  # type: ignore[misc]


def test_one_polyline_per_rank_with_every_point() -> None:
    lines = [
        svg.Line("rank 0", [[s, 2.0 / (s + 1)] for s in range(30)]),
        svg.Line("rank 1", [[s, 2.2 / (s + 1)] for s in range(30)]),
    ]
    root = parse(svg.line_chart(lines, title="loss"))
    drawn = root.findall(".//s:polyline", NS)
    assert [p.get("data-label") for p in drawn] == ["rank 0", "rank 1"]
    for p in drawn:
        pts = coords(p)
        assert len(pts) == 30
        assert [x for x, _ in pts] == sorted(x for x, _ in pts)  # steps left to right
        assert pts[0][1] < pts[-1][1]  # a falling loss: its first point is drawn higher
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "loss" in texts and "rank 0" in texts and "step" in texts


def test_words_from_apps_are_escaped() -> None:
    evil = '<script>alert(1)</script> & "quoted"'
    text = svg.line_chart([svg.Line(evil, [[0, 1.0], [1, 2.0]])], title=evil)
    assert "<script>" not in text
    root = parse(text)
    assert root.find(".//s:polyline", NS).get("data-label") == evil  # type: ignore[union-attr]


def test_log_scale_leaves_out_what_it_cannot_draw_and_says_so() -> None:
    line = svg.Line("r", [[0, 100.0], [1, 10.0], [2, 1.0], [3, 0.0], [4, -1.0], [5, "NaN"]])
    root = parse(svg.line_chart([line], log_y=True))
    pts = coords(root.find(".//s:polyline", NS))  # type: ignore[arg-type]
    assert len(pts) == 3
    # equal ratios, equal distances: 100 -> 10 -> 1 are evenly spaced on a log axis
    assert math.isclose(pts[1][1] - pts[0][1], pts[2][1] - pts[1][1], rel_tol=1e-3)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"1", "10", "100"} <= set(texts)
    assert any(t.startswith("3 value(s) left out") for t in texts)


def test_non_finite_values_are_skipped_on_a_linear_axis() -> None:
    line = svg.Line("r", [[0, 1.0], [1, "Infinity"], [2, None], [3, 3.0], ["x", 2.0]])
    root = parse(svg.line_chart([line]))
    assert len(coords(root.find(".//s:polyline", NS))) == 2  # type: ignore[arg-type]


def test_a_single_point_is_a_dot_and_nothing_is_a_note() -> None:
    root = parse(svg.line_chart([svg.Line("only", [[5, 0.5]])]))
    assert root.findall(".//s:polyline", NS) == [] and len(root.findall(".//s:circle", NS)) == 1
    empty = svg.line_chart([svg.Line("none", [])], title="loss")
    assert "no points yet" in empty and parse(empty).find(".//s:polyline", NS) is None


def test_scatter_of_numeric_parameters_keeps_their_order() -> None:
    dots = [svg.Dot("0.3", 0.01, "lr=0.3"), svg.Dot("0.03", 0.5, "lr=0.03"), svg.Dot(0.1, 0.2, "x")]
    root = parse(svg.scatter(dots, x_label="lr", y_label="loss"))
    circles = {c.get("data-label"): c for c in root.findall(".//s:circle", NS)}
    x = {k: float(c.get("cx", 0)) for k, c in circles.items()}
    y = {k: float(c.get("cy", 0)) for k, c in circles.items()}
    assert x["lr=0.03"] < x["x"] < x["lr=0.3"]
    assert y["lr=0.03"] < y["x"] < y["lr=0.3"]  # the highest loss drawn highest


def test_scatter_of_words_puts_them_in_categories() -> None:
    dots = [svg.Dot("adam", 1.0, "a"), svg.Dot("sgd", 2.0, "b"), svg.Dot("adam", 1.5, "c")]
    root = parse(svg.scatter(dots, x_label="optimizer"))
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "adam" in texts and "sgd" in texts
    cx = [float(c.get("cx", 0)) for c in root.findall(".//s:circle", NS)]
    assert cx[0] == cx[2] != cx[1]


def test_many_lines_get_a_legend_that_says_how_many_more() -> None:
    lines = [svg.Line(f"rank {r}", [[0, r], [1, r + 1]]) for r in range(20)]
    text = svg.line_chart(lines)
    assert "and 12 more" in text and len(parse(text).findall(".//s:polyline", NS)) == 20


def test_the_install_hint_follows_the_installation(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages" / "trainlaunch"
    pkgs = "'starlette>=1,<2' 'uvicorn>=0.30,<1'"
    pipx = "/home/me/.local/share/pipx/venvs/trainlaunch"
    assert install_hint("ui", pipx, site) == f"pipx inject trainlaunch {pkgs}"
    uv = "/home/me/.local/share/uv/tools/trainlaunch"
    assert install_hint("ui", uv, site) == f"uv pip install --python {uv}/bin/python {pkgs}"
    assert install_hint("ui", "/venv", site).endswith(f"-m pip install {pkgs}")
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "pyproject.toml").write_text("")
    hint = install_hint("ui", "/venv", tmp_path / "checkout")
    assert hint.startswith(f"pip install -e '{tmp_path / 'checkout'}[ui]'")


def test_each_extras_packages_are_pyprojects() -> None:
    from trainlaunch.cli.extras import PACKAGES
    from trainlaunch.config import _read_toml  # tomllib, or tomli before Python 3.11

    declared = _read_toml(Path(__file__).parents[2] / "pyproject.toml")["project"]
    extras = declared["optional-dependencies"]
    assert {k: tuple(extras[k]) for k in PACKAGES} == PACKAGES
