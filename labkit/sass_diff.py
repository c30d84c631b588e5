"""Two variants' machine code side by side (`labkit sass add --diff f16x8 f16x8_pack`, the explorer):
their SASS with the memory instructions aligned, and the counts that explain a time difference
(LDG/STG/LDS/STS by width, instructions, registers, spills). Needs nvcc and cuobjdump, no GPU.

Alignment, in two passes so the memory instructions line up even when the code around them
differs: (1) difflib on the two sequences of memory opcodes (LDG, STG, LDS, ...; widths ignored, so
a 32-bit LDG pairs with a 128-bit one) gives anchor pairs; (2) between consecutive anchors, difflib
on the base opcodes (IMAD, IADD3, ...) pairs the rest; what is left over stands alone on its side.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from html import escape

from .registry import get_op
from .sass import MEM_KINDS, counts, instructions, variant_kernel, width_summary


def _pair(x: dict | None, y: dict | None) -> dict:
    """One aligned row: mark ' ' same opcode, '|' different opcode, '<' only in a, '>' only in b."""
    if x is None or y is None:
        mark = "<" if y is None else ">"
    else:
        mark = " " if x["opcode"] == y["opcode"] else "|"
    return {"a": x, "b": y, "mark": mark, "mem": bool((x and x["mem"]) or (y and y["mem"]))}


def _segment(xa: list, xb: list) -> list:
    sm = SequenceMatcher(None, [i["base"] for i in xa], [i["base"] for i in xb], autojunk=False)
    out = []
    for tag, a0, a1, b0, b1 in sm.get_opcodes():
        if tag == "equal":
            out += [_pair(x, y) for x, y in zip(xa[a0:a1], xb[b0:b1])]
            continue
        ra, rb = xa[a0:a1], xb[b0:b1]
        if any(i["mem"] for i in ra + rb):  # a memory instruction never pairs with another kind: each side alone
            out += [_pair(x, None) for x in ra] + [_pair(None, y) for y in rb]
            continue
        for k in range(max(len(ra), len(rb))):  # replace / insert / delete: side by side, padded
            out.append(_pair(ra[k] if k < len(ra) else None, rb[k] if k < len(rb) else None))
    return out


def align(ia: list, ib: list) -> list:
    """Aligned rows of two instruction lists (labkit.sass.instructions), memory instructions anchored."""
    ma = [k for k, i in enumerate(ia) if i["mem"]]
    mb = [k for k, i in enumerate(ib) if i["mem"]]
    sm = SequenceMatcher(None, [ia[k]["base"] for k in ma], [ib[k]["base"] for k in mb], autojunk=False)
    anchors = [(ma[x + t], mb[y + t]) for x, y, n in sm.get_matching_blocks() for t in range(n)]
    rows, pa, pb = [], 0, 0
    for ka, kb in anchors + [(len(ia), len(ib))]:
        rows += _segment(ia[pa:ka], ib[pb:kb])
        if ka < len(ia):
            rows.append(_pair(ia[ka], ib[kb]))
        pa, pb = ka + 1, kb + 1
    return rows


def diff(op, a: str, b: str, arch: str = "90", dtype: str | None = None) -> dict:
    """{'op', 'arch', 'a': {variant, kernel, note, access, instructions, registers, shared, local,
    LDG: {bits: n}, STG, LDS, STS, LDGSTS}, 'b': {...}, 'rows': [{a, b, mark, mem}], 'summary': [lines]}.
    `a` and `b` are variant names of `op` (with `dtype` when a name exists for several dtypes)."""
    o = get_op(op)
    side, ins = {}, {}
    for key, name in (("a", a), ("b", b)):
        v = o.variant(name, dtype)
        f = variant_kernel(o, v, arch)
        side[key] = {"variant": v.name, "dtype": v.dtype, "kernel": v.kernel, "note": v.note, "access": v.access,
                     **counts(f)}
        ins[key] = [i for i in instructions(f["sass"]) if i["base"] != "NOP"]
    rows = align(ins["a"], ins["b"])
    return {"op": o.name, "arch": str(arch), "a": side["a"], "b": side["b"], "rows": rows,
            "summary": _summary(side["a"], side["b"])}


def _summary(sa: dict, sb: dict) -> list:
    """Plain lines on what differs: memory instructions by width, instructions, registers, spills."""
    out = []
    for kind in MEM_KINDS:
        na, nb = sum(sa[kind].values()), sum(sb[kind].values())
        if sa[kind] != sb[kind]:
            out.append(f"{kind}: {sa['variant']} {na} ({width_summary(sa[kind])}), "
                       f"{sb['variant']} {nb} ({width_summary(sb[kind])})")
    out.append(f"instructions: {sa['instructions']} vs {sb['instructions']}; registers per thread: "
               f"{sa['registers']} vs {sb['registers']}")
    if sa.get("local") or sb.get("local"):
        out.append(f"local memory (spills) per thread: {sa['local']} vs {sb['local']} bytes")
    return out


def _cell(i: dict | None, width: int) -> str:
    if i is None:
        return ""
    t = f"{i['addr']:04x}{'*' if i['mem'] else ' '} {i['text']}"
    return t if len(t) <= width else t[:width - 1] + "~"


def _counts_rows(d: dict) -> list:
    sa, sb = d["a"], d["b"]
    rows = [("variant", sa["variant"], sb["variant"]), ("kernel", sa["kernel"], sb["kernel"]),
            ("bytes per access", sa["access"], sb["access"]), ("registers / thread", sa["registers"], sb["registers"]),
            ("instructions", sa["instructions"], sb["instructions"])]
    for kind in MEM_KINDS:
        if sa[kind] or sb[kind]:
            rows.append((kind, width_summary(sa[kind]), width_summary(sb[kind])))
    rows.append(("local bytes (spills)", sa["local"], sb["local"]))
    return rows


def diff_text(op, a: str, b: str, arch: str = "90", dtype: str | None = None, width: int = 56) -> str:
    """Counts side by side, what differs, then the aligned listing (`*` marks a memory instruction;
    the middle column: ' ' same opcode, '|' different, '<' / '>' only on that side)."""
    d = diff(op, a, b, arch, dtype)
    lines = [f"{d['op']}: {d['a']['variant']} vs {d['b']['variant']}, sm_{d['arch']} SASS (nvcc + cuobjdump; no GPU needed)"]
    rows = _counts_rows(d)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(str(r[1])) for r in rows)
    lines += [f"  {r[0]:<{w0}}  {str(r[1]):<{w1}}  {r[2]}" for r in rows]
    lines += ["", *[f"  {s}" for s in d["summary"]], ""]
    lines.append(f"{d['a']['variant']:<{width}}   {d['b']['variant']}")
    for r in d["rows"]:
        lines.append(f"{_cell(r['a'], width):<{width}} {r['mark']} {_cell(r['b'], width)}".rstrip())
    return "\n".join(lines)


_STYLE = {" ": "", "|": "background:#fff4e5", "<": "background:#fdecea", ">": "background:#e8f5e9"}


def diff_html(op, a: str, b: str, arch: str = "90", dtype: str | None = None) -> str:
    """The diff as HTML: the counts table, what differs, and the aligned listing (memory
    instructions in bold on blue, differing opcodes shaded)."""
    d = diff(op, a, b, arch, dtype)
    head = "".join(f"<tr><th style='text-align:left'>{escape(str(k))}</th><td><code>{escape(str(x))}</code></td>"
                   f"<td><code>{escape(str(y))}</code></td></tr>" for k, x, y in _counts_rows(d))
    summary = "".join(f"<li>{escape(s)}</li>" for s in d["summary"])

    def cell(i):
        if i is None:
            return "<td></td><td></td>"
        t = escape(i["text"])
        if i["mem"]:
            t = f"<b>{t}</b>"
        return f"<td style='color:#888'>{i['addr']:04x}</td><td><code>{t}</code></td>"

    body = []
    for r in d["rows"]:
        style = _STYLE[r["mark"]] or ("background:#eef6ff" if r["mem"] else "")
        body.append(f"<tr style='{style}'>{cell(r['a'])}<td>{escape(r['mark'].strip())}</td>{cell(r['b'])}</tr>")
    return (f"<div class='lk-sass-diff'><b>{escape(d['op'])}: {escape(d['a']['variant'])} vs {escape(d['b']['variant'])}"
            f"</b>, sm_{escape(d['arch'])} SASS<table>{head}</table><ul>{summary}</ul>"
            "<table style='font-size:12px;border-collapse:collapse'>"
            f"<tr><th></th><th>{escape(d['a']['variant'])}</th><th></th><th></th><th>{escape(d['b']['variant'])}</th></tr>"
            f"{''.join(body)}</table></div>")
