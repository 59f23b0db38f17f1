#!/usr/bin/env python3
"""Where the size of a linked program goes, from the linker's map file (bloaty-like sums).

    scripts/binary-size.py MAP_FILE [--top N]

MAP_FILE is a GNU gold or ld.bfd map (`-Xlinker -Map=FILE` at link time; scripts/binary-size.sh
relinks the release fileproviderctl with one). Every input section the linker kept is counted
once, in the output section it went to, and grouped by where it came from: a Swift module of
this package (the `NAME.build` folder of its objects), a static library of the toolchain
(`libFoundation.a`, `lib_FoundationICU.a`, ...), or another object (the C runtime files). The
table has three columns: what is loaded (code, data, metadata: what `strip` keeps), the symbol
table (`.symtab`, `.strtab`: what `strip` removes and `strip --strip-debug` keeps) and debug
information (`.debug_*`: what both remove). What the linker makes itself (the merged
`.eh_frame`, relocations, merged strings, the symbol tables) is a group of its own; `.bss` is
counted though it takes no room in the file.
"""
import collections
import os
import re
import sys

INPUT = re.compile(r"^\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*)$")
NAMED_INPUT = re.compile(r"^ (\S+)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(\S.*)$")
# What the linker makes itself (gold: " ** eh_frame  ADDRESS SIZE", or the sizes on the next line).
SYNTHETIC = re.compile(r"^ \*\* ([^0]+?)\s*(?:(0x[0-9a-f]+)\s+(0x[0-9a-f]+))?$")
SYNTHETIC_SIZE = re.compile(r"^\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)$")
LINKER = "(made by the linker)"


def origin(path: str) -> str:
    """The group an input file counts in."""
    archive = re.match(r"(.*\.a)\((.*)\)$", path)
    if archive:
        return os.path.basename(archive.group(1))
    parent = os.path.basename(os.path.dirname(path))
    if parent.endswith(".build"):
        return parent[: -len(".build")]
    return os.path.basename(path)


def column(output: str) -> int:
    """0: loaded (code, data, metadata), 1: the symbol table, 2: debug information."""
    if output.startswith(".debug") or output == ".comment":
        return 2
    if output in (".symtab", ".strtab", ".shstrtab"):
        return 1
    return 0


def main() -> int:
    args = sys.argv[1:]
    top = 40
    if "--top" in args:
        at = args.index("--top")
        top = int(args[at + 1])
        del args[at : at + 2]
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sums: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    output, in_map, pending = "", False, False
    with open(args[0], errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if not in_map:
                in_map = line.startswith("Memory map") or line.startswith("Linker script and memory map")
                continue
            if line and not line[0].isspace():
                output = line.split()[0]
                continue
            if output == ".tbss":
                continue  # thread-local zeros: no room in the file
            synthetic = SYNTHETIC.match(line)
            if synthetic:
                pending = synthetic.group(3) is None
                if not pending:
                    sums[LINKER][column(output)] += int(synthetic.group(3), 16)
                continue
            if pending:
                pending = False
                sizes = SYNTHETIC_SIZE.match(line)
                if sizes:
                    sums[LINKER][column(output)] += int(sizes.group(2), 16)
                    continue
            match = NAMED_INPUT.match(line) or INPUT.match(line)
            if not match:
                continue
            size, path = int(match.groups()[-2], 16), match.groups()[-1]
            if size and path.startswith("/"):
                sums[origin(path)][column(output)] += size
    mb = lambda n: f"{n / 1e6:.2f}"
    print(f"{'from':<40} {'loaded MB':>10} {'symbols MB':>10} {'debug MB':>10}")
    groups = sorted(sums, key=lambda g: -sum(sums[g]))

    def row(name: str, values: list[int]) -> None:
        print(f"{name:<40} {mb(values[0]):>10} {mb(values[1]):>10} {mb(values[2]):>10}")

    for group in groups[:top]:
        row(group, sums[group])
    rest = groups[top:]
    if rest:
        row(f"({len(rest)} more)", [sum(sums[g][i] for g in rest) for i in range(3)])
    row("total", [sum(v[i] for v in sums.values()) for i in range(3)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
