"""Eval scenarios that reach back by recency and volume (docs/contract/decision.md step 7),
and the current turn's own rows, which are never mixed with the history."""

from __future__ import annotations

import random
from collections.abc import Callable

from .builders import Case, instances, sites, telemetry
from .talk import DONE, Made, ask, call, finish, history, turn_with


# --- recency without a named group --------------------------------------------------------
def recency_cases() -> list[tuple[str, str, Callable[[Case, random.Random], None]]]:
    def seed_window(case: Case, rng: random.Random) -> None:
        made: Made = {}

        def first() -> None:
            call(case, made, ("list_instances", {"name_filter": "sat-07"}, instances(["sat-07"])))
            history(case, made, "BatteryVoltage1", 900)

        turn_with(case, "get the BatteryVoltage1 history", "900 samples.", first)
        t1 = case.turn_id
        turn_with(
            case,
            "which instance was that?",
            "sat-07.",
            lambda: call(case, made, ("list_instances", {}, instances(["sat-07"]))),
        )
        turn_with(
            case,
            "facts about it?",
            "A bus.",
            lambda: call(case, made, ("get_facts", {"topic": "bus"}, {"name": "bus"})),
        )
        finish(
            case, made, ask(rng, "csv"), "csv", (t1, "list_parameter_history"), "reach_back_newest"
        )

    def newest_dataset(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(case, "get BusVoltage", "ok", lambda: history(case, made, "BusVoltage", 70))
        turn_with(case, "get PanelTemp4", "ok", lambda: history(case, made, "PanelTemp4", 40))
        fmt = rng.choice(["json", "xml"])
        finish(
            case,
            made,
            ask(rng, fmt),
            fmt,
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
        )

    def best_of_the_newest_turn(case: Case, rng: random.Random) -> None:
        made: Made = {}

        def two() -> None:
            call(
                case,
                made,
                ("get_telemetry", {"parameter": "BusVoltage"}, telemetry("BusVoltage", 30)),
                (
                    "list_parameter_history",
                    {"parameter": "PanelTemp4"},
                    telemetry("PanelTemp4", 80),
                ),
            )

        turn_with(case, "bus voltage and panel temperature", "Both.", two)
        finish(
            case,
            made,
            ask(rng, "csv"),
            "csv",
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
        )

    def only_small_groups(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "sites?",
            "Four.",
            lambda: call(
                case, made, ("list_sites", {}, sites(["Kiruna", "Svalbard", "Troll", "Inuvik"]))
            ),
        )
        turn_with(
            case,
            "instances?",
            "Two.",
            lambda: call(case, made, ("list_instances", {}, instances(["sat-03", "sat-07"]))),
        )
        finish(
            case, made, ask(rng, "json"), "json", (case.turn_id, "list_instances"), "reach_back_any"
        )

    def names_nothing_there(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(case, "get BusVoltage", "ok", lambda: history(case, made, "BusVoltage", 90))
        turn_with(
            case, "get BatteryVoltage1", "ok", lambda: history(case, made, "BatteryVoltage1", 45)
        )
        finish(
            case,
            made,
            "create a csv of the humidity data",
            "csv",
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
        )

    def failed_newest(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(case, "get BusVoltage", "ok", lambda: history(case, made, "BusVoltage", 90))
        t1 = case.turn_id
        turn_with(
            case,
            "get PanelTemp4",
            "The call failed.",
            lambda: history(case, made, "PanelTemp4", 45, success=False),
        )
        finish(
            case, made, ask(rng, "xml"), "xml", (t1, "list_parameter_history"), "reach_back_newest"
        )

    def marker_only(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "get BusVoltage",
            "ok",
            lambda: history(case, made, "BusVoltage", 240, size=120, row_count=False),
        )
        turn_with(
            case, "facts?", "ok", lambda: call(case, made, ("get_facts", {}, {"name": "bus"}))
        )
        finish(
            case,
            made,
            ask(rng, "csv"),
            "csv",
            (f"turn_eval_{case.number:03d}_1", "list_parameter_history"),
            "reach_back_newest",
        )

    def newer_lookup_only(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(case, "get PanelTemp4", "ok", lambda: history(case, made, "PanelTemp4", 33))
        t1 = case.turn_id
        turn_with(
            case,
            "list the instances",
            "Three.",
            lambda: call(
                case, made, ("list_instances", {}, instances(["sat-03", "sat-07", "sat-11"]))
            ),
        )
        finish(
            case,
            made,
            ask(rng, "xlsx"),
            "xlsx",
            (t1, "list_parameter_history"),
            "reach_back_newest",
        )

    return [
        ("seed_window", "the seed's measured window: lookups newer than the dataset", seed_window),
        ("newest_dataset", "two datasets, nothing named: the newest", newest_dataset),
        ("best_of_turn", "the newest turn's best group: most rows", best_of_the_newest_turn),
        ("only_small", "no dataset: the newest group with rows", only_small_groups),
        ("names_nothing", "subject words in no group: recency", names_nothing_there),
        ("failed_newest", "failed results are no candidates", failed_newest),
        ("marker_only", "estimates from remaining_items alone", marker_only),
        ("newer_lookup", "a newer lookup under 10 rows loses to the dataset", newer_lookup_only),
    ]


# --- the current turn's own rows are never mixed with the history ---------------------------
def current_versus_history(case: Case, rng: random.Random) -> None:
    made: Made = {}
    turn_with(
        case, "get BatteryVoltage1", "ok", lambda: history(case, made, "BatteryVoltage1", 300)
    )
    case.user(f"now the instances. {ask(rng, 'csv')}")
    call(case, made, ("list_instances", {}, instances(["sat-03", "sat-07", "sat-11"])))
    case.reply(rng.choice(DONE))
    case.event(40)
    group = made[(case.turn_id, "list_instances")]
    case.expect(
        "published", "csv", source="action_rows", rule="single_group", rows=3, groups=[group]
    )


def failed_current_reaches_back(case: Case, rng: random.Random) -> None:
    made: Made = {}
    turn_with(
        case, "get BatteryVoltage1", "ok", lambda: history(case, made, "BatteryVoltage1", 300)
    )
    t1 = case.turn_id
    case.user(f"refresh it. {ask(rng, 'json')}")
    history(case, made, "BatteryVoltage1", 300, success=False)
    case.reply("The refresh failed; the earlier data is attached.")
    case.event(40)
    group = made[(t1, "list_parameter_history")]
    case.expect(
        "published", "json", source="prior_turn", rule="reach_back_newest", rows=300, groups=[group]
    )
