"""External backend benchmarks (issue 21): the reference Python backend
(Backends/python/fileprovider-backend-pyfolder, a local folder behind the line protocol of
Docs/ExternalBackends.md) against the built-in local backend over the same folder, so what is
measured is the cost of the protocol and of the program.

- external-first-sync-100k: `domain add` + `sync` of the 100,000-file tree through pyfolder vs
  through the built-in local backend. Target: within 3× of the built-in backend.
- external-materialize-1g: `materialize` of one 1 GiB file through pyfolder (the program copies
  it into the file the engine names; contents never travel through the pipe) vs the built-in
  backend. Target: within 1.2×.

The program is found on PATH: the harness runs our commands with PATH set to Backends/python,
then /usr/local/bin:/usr/bin:/bin, so `#!/usr/bin/env python3` finds the system's Python
(Debian's python3). A version manager's shim first on PATH (pyenv's is a shell script that
runs a dozen programs) would add its own start-up to each program start (twice per command:
describe, then open), about 0.5 s here, which is not the protocol's cost.
"""

from __future__ import annotations


def register(bench) -> None:
    Run, Tool, Benchmark, ours, DOMAIN = bench.Run, bench.Tool, bench.Benchmark, bench.ours, bench.DOMAIN
    backends = bench.REPO / "Backends" / "python"

    def pyfolder(r, *args: str) -> list[str]:
        # env(1) puts the reference backend on the program's PATH for this command only.
        return ["env", f"PATH={backends}:/usr/local/bin:/usr/bin:/bin", *r.fpctl(*args)]

    def add_and_sync_external(r) -> list[list[str]]:
        return [pyfolder(r, "domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "pyfolder", "--root", str(r.data)), pyfolder(r, "sync", DOMAIN)]

    local_sync = "fileproviderctl domain add + sync (built-in local)"
    local_materialize = "fileproviderctl materialize (built-in local)"
    bench.BENCHMARKS += [
        Benchmark(
            "external-first-sync-100k",
            "tree100k",
            [ours("fileproviderctl domain add + sync (pyfolder)", add_and_sync_external), Tool(local_sync, Run.add_and_sync)],
            reference=local_sync,
            target=bench.at_most_times(3, "the built-in local backend"),
            items=100_000,
            group="external",
        ),
        Benchmark(
            "external-materialize-1g",
            "big1g",
            [
                ours(
                    "fileproviderctl materialize (pyfolder)",
                    lambda r: [pyfolder(r, "materialize", "-R", f"{DOMAIN}:/")],
                    setup=add_and_sync_external,
                ),
                Tool(local_materialize, lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")], setup=Run.add_and_sync),
            ],
            reference=local_materialize,
            target=bench.at_most_times(1.2, "the built-in local backend"),
            group="external",
        ),
    ]
