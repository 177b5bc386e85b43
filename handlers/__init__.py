"""The decision core: pure functions from plain data to the decision for one turn (no I/O).

Its values (phases, plans, selections, references) are frozen `msgspec.Struct`s, as are the
worker's: a struct class is made in C (~0.03 ms here), where a frozen dataclass compiles
its generated methods (~1.3 ms), and some fifty of them were loaded by a fresh worker's
first message; a struct is built faster too (benchmarks/PROFILE.md).
"""
