"""Settings every test shares.

Hypothesis's per-example deadline (200 ms by default) is off: a property test's example
that takes longer because the machine is busy (CI runs the suites beside the emulators on
two cores) is not a failure of the property. A test that needs speed measures it in
`benchmarks/`, never in a timed test.
"""

from hypothesis import settings

settings.register_profile("project", deadline=None)
settings.load_profile("project")
