"""Eval scenarios where the request names the dataset it means (relevance:
docs/contract/decision.md step 7).
Each case names the group it means; the contract oracle (`oracle.py`) confirms the design."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .builders import Case, alarm_events, instances, sites, telemetry
from .talk import Made, call, finish, history, turn_with


# --- relevance --------------------------------------------------------------------------
def relevance_cases() -> list[tuple[str, str, Callable[[Case, random.Random], None]]]:
    def seed_example(case: Case, rng: random.Random) -> None:
        made: Made = {}

        def first() -> None:
            call(
                case,
                made,
                ("list_instances", {"name_filter": "sat-07"}, instances(["sat-07"])),
                (
                    "list_parameters",
                    {"instance_id": "sat-07", "name_filter": "BatteryVoltage1"},
                    [{"parameter": "BatteryVoltage1", "unit": "V"}],
                ),
            )
            history(case, made, "BatteryVoltage1", 900)

        turn_with(
            case, "Retrieve the BatteryVoltage1 history for instance sat-07", "Got 900.", first
        )
        t1 = case.turn_id
        turn_with(
            case,
            "and the Temperature1 history?",
            "600 samples.",
            lambda: history(case, made, "Temperature1", 600, size=300),
        )
        text = "create a csv of the BatteryVoltage1 samples"
        finish(case, made, text, "csv", (t1, "list_parameter_history"), "reach_back_named")

    def middle_of_three(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turns = {}
        for parameter, n in (("BusVoltage", 60), ("PanelTemp4", 80), ("ReactionWheelSpeed3", 50)):
            turn_with(
                case,
                f"show me {parameter}",
                "Here it is.",
                lambda p=parameter, k=n: history(case, made, p, k, action="get_telemetry"),
            )
            turns[parameter] = case.turn_id
        fmt = rng.choice(["json", "xml"])
        text = f"export the PanelTemp4 readings to {fmt}"
        finish(case, made, text, fmt, (turns["PanelTemp4"], "get_telemetry"), "reach_back_named")

    def by_action_name(case: Case, rng: random.Random) -> None:
        made: Made = {}
        events = {"items": alarm_events(40, seed=case.number)}
        turn_with(
            case,
            "any alarms on the EPS?",
            "40 alarm events.",
            lambda: call(case, made, ("list_alarm_events", {"subsystem": "EPS"}, events)),
        )
        t1 = case.turn_id
        turn_with(
            case,
            "and the bus voltage history",
            "300 samples.",
            lambda: history(case, made, "BusVoltage", 300, size=150),
        )
        finish(
            case,
            made,
            "export the alarm events as xml",
            "xml",
            (t1, "list_alarm_events"),
            "reach_back_named",
        )

    def by_column(case: Case, rng: random.Random) -> None:
        made: Made = {}
        log = [
            {
                "timestamp": f"2026-11-19T{h:02d}:{m:02d}:00Z",
                "cell_temperature": 20 + (h + m) % 7,
                "heater_on": m % 2 == 0,
            }
            for h in range(5)
            for m in range(0, 60, 9)
        ]
        turn_with(
            case,
            "check the thermal log of the aft bay",
            "35 entries.",
            lambda: call(case, made, ("get_thermal_log", {"zone": "aft bay"}, log)),
        )
        t1 = case.turn_id
        turn_with(
            case,
            "and BatteryVoltage1?",
            "200 samples.",
            lambda: history(case, made, "BatteryVoltage1", 200),
        )
        finish(
            case,
            made,
            "give me the cell temperature log as a spreadsheet",
            "xlsx",
            (t1, "get_thermal_log"),
            "reach_back_named",
        )

    def passes(station: str, n: int, seed: int, with_name: bool) -> list[dict[str, Any]]:
        return [
            {
                "pass_id": f"P{seed}{i:03d}",
                "aos": f"2026-11-19T{i % 24:02d}:10:00Z",
                "elevation_deg": 10 + (i * 7 + seed) % 70,
                **({"station_name": station} if with_name else {}),
            }
            for i in range(n)
        ]

    def by_argument(case: Case, rng: random.Random) -> None:
        made: Made = {}
        for station, n in (("Kiruna", 40), ("Svalbard", 30)):
            rows = passes(station, n, case.number, False)
            turn_with(
                case,
                f"passes over {station} today?",
                f"{n} passes.",
                lambda s=station, r=rows: call(case, made, ("list_passes", {"station": s}, r)),
            )
            if station == "Kiruna":
                t1 = case.turn_id
        finish(
            case,
            made,
            "export the Kiruna passes as csv",
            "csv",
            (t1, "list_passes"),
            "reach_back_named",
        )

    def by_citation_strings(case: Case, rng: random.Random) -> None:
        made: Made = {}
        for station, code in (("Kiruna", "KIR"), ("Svalbard", "SVA")):
            rows = passes(station, 25, case.number, True)
            turn_with(
                case,
                f"passes for {code}",
                "25 passes.",
                lambda c=code, r=rows: call(case, made, ("list_passes", {"station_id": c}, r)),
            )
            if code == "KIR":
                t1 = case.turn_id
        finish(
            case,
            made,
            "csv of the Kiruna passes please",
            "csv",
            (t1, "list_passes"),
            "reach_back_named",
        )

    def tie_goes_to_the_newest(case: Case, rng: random.Random) -> None:
        # "BatteryVoltage1" and "BatteryVoltage2" share battery and voltage; the digit is
        # dropped, so the scores tie and the newest turn wins (docs/contract/decision.md step 7).
        made: Made = {}
        turn_with(
            case,
            "BatteryVoltage1 please",
            "120 samples.",
            lambda: history(case, made, "BatteryVoltage1", 120),
        )
        turn_with(
            case,
            "and BatteryVoltage2",
            "90 samples.",
            lambda: history(case, made, "BatteryVoltage2", 90),
        )
        finish(
            case,
            made,
            "create a csv of the BatteryVoltage1 samples",
            "csv",
            (case.turn_id, "list_parameter_history"),
            "reach_back_named",
        )

    def named_but_small(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "which ground sites do we have?",
            "Four sites.",
            lambda: call(
                case, made, ("list_sites", {}, sites(["Kiruna", "Svalbard", "Troll", "Inuvik"]))
            ),
        )
        turn_with(
            case,
            "BusVoltage for the last two hours",
            "120 samples.",
            lambda: history(case, made, "BusVoltage", 120),
        )
        finish(
            case,
            made,
            "create a csv of the ground sites",
            "csv",
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
        )

    def higher_score_beats_newer(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "get BatteryVoltage1",
            "100 samples.",
            lambda: history(case, made, "BatteryVoltage1", 100),
        )
        t1 = case.turn_id
        status = [{"battery_id": f"B{i}", "charge_pct": 60 + i} for i in range(40)]
        turn_with(
            case,
            "battery status of all packs",
            "40 packs.",
            lambda: call(case, made, ("get_battery_status", {"fleet": "all"}, status)),
        )
        finish(
            case,
            made,
            "export the BatteryVoltage1 history to json",
            "json",
            (t1, "list_parameter_history"),
            "reach_back_named",
        )

    def one_group_two_parameters(case: Case, rng: random.Random) -> None:
        # Results are grouped by (turn, action): both parameters fetched by the same action
        # in one turn are one group, so the named group holds both
        # (docs/contract/decision.md step 7).
        made: Made = {}

        def both() -> None:
            volts = telemetry("BatteryVoltage1", 60, seed=1)
            temps = telemetry("Temperature1", 60, seed=2)
            call(
                case,
                made,
                ("list_parameter_history", {"parameter": "BatteryVoltage1"}, {"items": volts}),
                ("list_parameter_history", {"parameter": "Temperature1"}, {"items": temps}),
            )

        turn_with(case, "get BatteryVoltage1 and Temperature1", "Both fetched.", both)
        t1 = case.turn_id
        turn_with(
            case,
            "what is sat-07?",
            "A satellite.",
            lambda: call(case, made, ("get_facts", {"topic": "sat-07"}, {"name": "sat-07"})),
        )
        finish(
            case,
            made,
            "export the Temperature1 history as csv",
            "csv",
            (t1, "list_parameter_history"),
            "reach_back_named",
        )

    def marker_estimate(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "BatteryCurrent2 please",
            "200 samples.",
            lambda: history(case, made, "BatteryCurrent2", 200, row_count=False),
        )
        t1 = case.turn_id
        turn_with(
            case,
            "now Temperature1",
            "100 samples.",
            lambda: history(case, made, "Temperature1", 100),
        )
        finish(
            case,
            made,
            "BatteryCurrent2 as xml",
            "xml",
            (t1, "list_parameter_history"),
            "reach_back_named",
        )

    def only_stop_words(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case, "get BatteryVoltage1", "Done.", lambda: history(case, made, "BatteryVoltage1", 80)
        )
        turn_with(
            case, "get Temperature1", "Done.", lambda: history(case, made, "Temperature1", 70)
        )
        finish(
            case,
            made,
            "export all the data as a spreadsheet",
            "xlsx",
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
        )

    def outside_the_window(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case, "get BatteryVoltage1", "Done.", lambda: history(case, made, "BatteryVoltage1", 80)
        )
        turn_with(
            case, "get Temperature1", "Done.", lambda: history(case, made, "Temperature1", 70)
        )
        window = {case.turn_id}  # history_limit 4: only the last turn's 4 messages are seen
        finish(
            case,
            made,
            "create a csv of the BatteryVoltage1 samples",
            "csv",
            (case.turn_id, "list_parameter_history"),
            "reach_back_newest",
            history_limit=4,
            window_turns=window,
        )

    def both_named_newest_wins(case: Case, rng: random.Random) -> None:
        made: Made = {}
        for instance in ("sat-03", "sat-11"):
            turn_with(
                case,
                f"BusVoltage on {instance}",
                "Done.",
                lambda i=instance: history(
                    case, made, "BusVoltage", 50, instance=i, action="get_telemetry"
                ),
            )
        finish(
            case,
            made,
            "csv of the BusVoltage data",
            "csv",
            (case.turn_id, "get_telemetry"),
            "reach_back_named",
        )

    def most_rows_in_the_turn(case: Case, rng: random.Random) -> None:
        made: Made = {}

        def two() -> None:
            hist = telemetry("BatteryVoltage1", 50, seed=3)
            trend = telemetry("BatteryVoltage1", 20, step=300, seed=4)
            call(
                case,
                made,
                ("get_voltage_trend", {"parameter": "BatteryVoltage1"}, trend),
                ("get_voltage_history", {"parameter": "BatteryVoltage1"}, hist),
            )

        turn_with(case, "voltage history and trend", "Both.", two)
        finish(
            case,
            made,
            "BatteryVoltage1 as json please",
            "json",
            (case.turn_id, "get_voltage_history"),
            "reach_back_named",
        )

    def first_called_on_a_full_tie(case: Case, rng: random.Random) -> None:
        made: Made = {}

        def two() -> None:
            call(
                case,
                made,
                ("get_voltage_a", {"parameter": "BusVoltage"}, telemetry("BusVoltage", 30, seed=5)),
                ("get_voltage_b", {"parameter": "BusVoltage"}, telemetry("BusVoltage", 30, seed=6)),
            )

        turn_with(case, "bus voltage, both sources", "Both.", two)
        finish(
            case,
            made,
            "the BusVoltage samples as xml",
            "xml",
            (case.turn_id, "get_voltage_a"),
            "reach_back_named",
        )

    return [
        (
            "seed_batteryvoltage1",
            "the seed's example: named two turns back beats a newer set",
            seed_example,
        ),
        ("middle_of_three", "named by parameter among three datasets", middle_of_three),
        ("by_action_name", "named by the action's name", by_action_name),
        ("by_column", "named by column names", by_column),
        ("by_argument", "named by a call argument", by_argument),
        ("by_citation", "named by strings in the compact citation", by_citation_strings),
        ("tie_newest", "equal scores: the newest turn wins", tie_goes_to_the_newest),
        ("named_small", "a named group under 10 rows is no candidate", named_but_small),
        ("higher_score", "a higher score beats a newer group", higher_score_beats_newer),
        (
            "one_group",
            "one action in one turn is one group, both parameters",
            one_group_two_parameters,
        ),
        ("marker_estimate", "estimate from remaining_items alone", marker_estimate),
        ("stop_words_only", "a request of stop words names nothing", only_stop_words),
        ("outside_window", "a named group outside the window is not seen", outside_the_window),
        ("both_named", "both named equally: the newest", both_named_newest_wins),
        ("most_rows", "same score and turn: most estimated rows", most_rows_in_the_turn),
        ("first_called", "full tie: the first called", first_called_on_a_full_tie),
    ]
