"""docs/contract/decision.md step 4: which format a user message requests."""

from __future__ import annotations

from typing import Any

import pytest

from handlers.formats import detect_format, refused_formats
from schemas.vocabulary import RequestFormat

# (rule, text, expected): one table, split below into one test per rule.
PHRASINGS: list[tuple[str, str, RequestFormat | None]] = [
    # the seeds' phrasings
    ("seed", "create a csv", "csv"),
    ("seed", "Retrieve the BatteryVoltage1 history for instance sat-07 and create a csv", "csv"),
    ("seed", "yes, one row per sample", None),
    ("seed", "actually make it a pdf", "pdf"),
    ("seed", "create a csv of the BatteryVoltage1 history", "csv"),
    ("seed", "List the instances and the ground sites and create a csv", "csv"),
    # a named format requests it
    ("named", "please give me the data as XML", "xml"),
    ("named", "export it to json", "json"),
    ("named", "CSV", "csv"),
    ("named", "csvs please", "csv"),
    ("named", "save it as data.csv", "csv"),
    ("named", "an xls file", "xlsx"),
    ("named", "give me an xlsx", "xlsx"),
    ("named", "I'd like it in Excel", "xlsx"),
    ("named", "Excel please", "xlsx"),
    ("named", "what I need is a csv", "csv"),
    ("named", "don't forget to create a csv", "csv"),
    ("named", "Explain the data and export a csv", "csv"),
    ("named", "No, csv", "csv"),
    # unsupported formats are detected too
    ("unsupported", "Can you make it a PDF instead?", "pdf"),
    ("unsupported", "put it in a word document", "docx"),
    ("unsupported", "export as word", "docx"),
    ("unsupported", "export it to Microsoft Word", "docx"),
    ("unsupported", "as a .doc", "docx"),
    ("unsupported", "give me a docx", "docx"),
    ("unsupported", "markdown table please", "md"),
    ("unsupported", "convert it into markdown", "md"),
    ("unsupported", "md", "md"),
    # word boundaries
    ("boundary", "jsonify the rows", None),
    ("boundary", "jsonl export", None),
    ("boundary", "a word about the data", None),
    ("boundary", "in a word, great", None),
    ("boundary", "I mean the md5 hash", None),
    ("boundary", "the xmlns attribute", None),
    # a format glued to a script written without spaces is still named
    ("boundary", "CSVでエクスポートしてください", "csv"),
    ("boundary", "CSV로 내보내 주세요", "csv"),
    ("boundary", "请导出为JSON格式", "json"),
    ("boundary", "csv_export please", None),
    # negations do not request
    ("negation", "don't create a csv", None),
    ("negation", "please forget the csv", None),
    ("negation", "I wont need a csv", None),
    ("negation", "export the sensors also not reporting in csv", None),
    ("negation", "you can forget the csv", None),
    ("negation", "That isnt a csv request", None),
    ("negation", "it isnt for a csv", None),
    ("negation", "I never open it as csv", None),
    ("negation", "we also don't care about it as csv", None),
    ("negation", "export the rows not as csv", None),
    ("negation", "do not export json", None),
    ("negation", "without json", None),
    ("negation", "no csv please", None),
    ("negation", "never xml", None),
    ("negation", "not as a csv", None),
    ("negation", "I do not want the data exported as a csv", None),
    ("negation", "don't export json and xml", None),
    ("negation", "I can't open the csv", None),
    ("negation", "Don't create a csv, make it json", "json"),
    ("negation", "not csv but json", "json"),
    ("negation", "json, not csv", "json"),
    ("negation", "make it xml instead of json", "xml"),
    ("negation", "instead of csv, give me json", "json"),
    ("negation", "don't include the timestamps and export a csv", "csv"),
    ("negation", "give me a CSV file, not an XLSX", "csv"),
    ("negation", "I don't want it as csv", None),
    ("negation", "Please never send it as an xlsx", None),
    ("negation", "Do not export the readings as csv", None),
    ("negation", "export it but not as a csv", None),
    ("negation", "I'd rather not get the rows as csv", None),
    ("negation", "the rows with no errors, not as csv", None),
    # a negation that says which data, before a conversion target, does not refuse it
    ("negation", "Export the rows with no errors to csv", "csv"),
    ("negation", "Give me the readings with no gaps as a csv", "csv"),
    ("negation", "Export the list of users who never logged in as csv", "csv"),
    ("negation", "Export sensors not reporting as csv", "csv"),
    ("negation", "Put the devices with no firmware update into a json file", "json"),
    ("negation", "Export all sensors except the broken ones as xlsx", "xlsx"),
    ("negation", "Export the rows that don't have errors as csv", None),  # "have" may ask
    # only the negations that can say which data ("no", "not", "never", "-n't", ...) may
    # describe it: "cannot" refuses
    ("negation", "my manager cannot read it in xml", None),
    ("negation", "the team avoid opening it as json", None),
    ("negation", "I like it but not now but create a csv", "csv"),  # the last "but" resets
    ("negation", "don't alpha beta gamma delta epsilon zeta eta csv", None),  # 8 words back
    ("negation", "don't alpha beta gamma delta epsilon zeta eta theta csv", "csv"),  # 9 back
    # eight words back past the first window's 256 characters, seven inside it
    ("negation", "don't " + " ".join(c * 35 for c in "abcdefg") + " csv", None),
    # a verb of asking after a refused format starts a new clause
    ("negation", "instead of json give me xml", "xml"),
    ("negation", "without json give me xml", "xml"),
    ("negation", "rather than csv use json", "json"),
    ("negation", "I don't want json I want xml", "xml"),
    ("negation", "don't send json send xml", "xml"),
    ("negation", "don't convert the json to xml", None),  # no verb between: one clause
    ("negation", "not csv or json", None),
    # cancelling a format refuses it
    ("negation", "forget the csv, give me json", "json"),
    ("negation", "never mind the csv, create xml", "xml"),
    ("negation", "scrap the csv and make a json", "json"),
    ("negation", "never mind the csv", None),
    ("negation", "do not forget to make a csv", "csv"),
    ("negation", "don't forget the csv", "csv"),
    # questions about a format do not request
    ("question", "what is XML?", None),
    ("question", "what's a csv file", None),
    ("question", "how do I open a json file?", None),
    ("question", "explain the data and tell me how to make a csv", None),  # the later about cue
    ("question", "is xlsx better than csv?", None),
    ("question", "can you explain markdown?", None),
    ("question", "csv or json?", None),
    ("question", "Thanks, what is xml?", None),
    ("question", "The data looks good, what is xml?", None),
    ("question", "can you tell me how to make a csv?", None),
    ("question", "did you create a csv?", None),
    ("question", "why not json?", None),
    ("question", "can csv files be opened in excel?", None),
    ("question", "would json be better?", None),
    ("question", "explain json", None),
    ("question", "What is XML? Anyway, create a csv.", "csv"),
    # polite requests phrased as questions do request
    ("polite", "can you create a csv?", "csv"),
    ("polite", "could you export that as json?", "json"),
    ("polite", "would you put it in a spreadsheet?", "xlsx"),
    ("polite", "can I get this as an excel file?", "xlsx"),
    ("polite", "Could you please create a CSV?", "csv"),
    ("polite", "Great, can you export as json?", "json"),
    ("polite", "is it possible to export as json?", "json"),
    ("polite", "would you mind exporting it to xml?", "xml"),
    ("polite", "can it be exported as json?", "json"),
    ("polite", "how about json?", "json"),
    ("polite", "what about xml instead?", "xml"),
    ("polite", "create a csv?", "csv"),
    ("polite", "can you explain markdown and create a csv?", "csv"),
    ("polite", "can you show me the csv?", "csv"),
    ("polite", "could you retrieve that as json?", "json"),
    ("polite", "can you pull that into a spreadsheet?", "xlsx"),
    ("polite", "could you compile a csv?", "csv"),
    ("polite", "can you redo it as json instead of csv", "json"),
    ("polite", "can you regenerate the csv?", "csv"),
    # a verb of looking asks only when it names what to make
    ("polite", "could I see it as json?", "json"),
    ("polite", "can you list them in a csv?", "csv"),
    ("polite", "can you print it as csv?", "csv"),
    ("polite", "can you see the csv?", None),
    ("polite", "can you list the csv files?", None),
    # ... and never stands in for a verb of asking before it ("list" is a noun too)
    ("polite", "Can you make a device list csv?", "csv"),
    ("polite", "Could you send a copy of the csv?", "csv"),
    ("polite", "Can you create a list of sensors and a csv?", "csv"),
    ("polite", "and in xml?", "xml"),  # a bare fragment naming a target
    ("polite", "as json?", "json"),
    ("polite", "ok do it in csv", "csv"),  # an imperative, not a question
    ("polite", "Do the same in xml", "xml"),
    ("polite", "Do you have a csv", None),
    ("polite", "do csv", "csv"),  # "do" before a format it names is an imperative
    ("polite", "please do a csv, not xml", "csv"),
    ("polite", "do the json again", "json"),
    ("polite", "do csv files support unicode", None),  # ... and before its files, a question
    ("polite", "can I open it in excel?", None),
    # several named: the first mentioned wins
    ("first", "csv or json", "csv"),
    ("first", "json and also a csv", "json"),
    ("first", "xml, or json if xml is hard", "xml"),
    ("first", "xlsx and csv", "xlsx"),
    ("first", "make a pdf and a csv", "pdf"),
    # a correction takes back the formats asked for before it; "also" or "too" adds one
    ("correction", "json, sorry, I meant csv", "csv"),
    ("correction", "xml. no wait, csv", "csv"),
    ("correction", "json - no, csv", "csv"),
    ("correction", "make json. Actually, make it csv", "csv"),
    ("correction", "export json, or rather csv", "csv"),
    ("correction", "create a json file. On second thought, csv", "csv"),
    ("correction", "export as json. Correction: csv", "csv"),
    ("correction", "export json. Make it csv instead.", "csv"),
    ("correction", "export json. a csv file instead", "csv"),
    ("correction", "convert the json to xml. actually, make it csv", "csv"),
    ("correction", "make xml. actually, convert the json to csv", "csv"),  # a target again
    ("correction", "csv. actually excel", "xlsx"),  # the csv it yielded to is taken back
    ("correction", "Make a csv. Actually, can you also make a json?", "csv"),
    ("correction", "Make a csv. Actually, a json too", "csv"),
    ("correction", "export csv. actually, not json", "csv"),  # nothing asked after it
    ("correction", "export csv, actually I mean all of it", "csv"),
    ("correction", "sorry, can you export a csv and a json", "csv"),  # nothing asked before
    ("correction", "make the csv, I'll wait for the json", "csv"),  # waiting, not a correction
    ("correction", "can you redo it as json instead of csv", "json"),
    # "excel" and "spreadsheet" mean xlsx unless csv is named
    ("excel", "export to excel", "xlsx"),
    ("excel", "a csv I can open in excel", "csv"),
    ("excel", "put it in a spreadsheet, a csv is fine", "csv"),
    ("excel", "put it in a spreadsheet, not a csv", "xlsx"),
    # only "excel" and "spreadsheet" yield to a csv named beside them
    ("excel", "convert it to xml and give me a csv too", "xml"),
    ("excel", "export it as markdown and a csv", "md"),
    ("excel", "put it in a word document and a csv too", "docx"),
    ("excel", "a spreadsheet please", "xlsx"),
    # a conversion target wins over the format converted from
    ("target", "convert JSON to XML", "xml"),
    ("target", "turn this PDF into XML", "xml"),
    ("target", "the json as csv", "csv"),
    ("target", "Could you export the json as xml please", "xml"),
    ("target", "export the data from the json file to xml", "xml"),
    ("target", "Can you convert the attached spreadsheet to json?", "json"),
    ("target", "Please turn my spreadsheet into a CSV", "csv"),
    ("target", "convert my csv to excel", "xlsx"),
    ("target", "give me the xml in json", "json"),
    ("target", "here is my csv, can you make it json?", "json"),
    # an arrow names the target as "to" does, spaced or not
    ("target", "json -> csv", "csv"),
    ("target", "xlsx→json please", "json"),
    ("target", "convert the readings.json => xml", "xml"),
    ("target", "csv ⇒ json?", "json"),
    ("negation", "don't convert json -> csv", None),
    ("target", "Review the attached JSON and give me an XML version", "xml"),
    ("target", "don't convert to xml, give me json", "json"),
    ("target", "a csv as well as json", "csv"),
    ("target", "json, such as xml", "json"),
    ("target", "export to json or xml", "json"),
    # a format named as what the user already has is the input, not a request
    ("input", "Analyze this spreadsheet.", None),
    ("input", "analyze the spreadsheet", None),
    ("input", "validate this JSON object", None),
    ("input", "the attached csv", None),
    ("input", "Look at the attached csv and tell me what you think", None),
    ("input", "my xlsx", None),
    ("input", "I uploaded a json file, make a csv from it", "csv"),
    ("input", "make this a csv", "csv"),
    ("input", "check the csv", None),
    ("input", "Can you review my sales spreadsheet?", None),
    ("input", "parse the json I pasted", None),
    ("input", "What trends are in the uploaded csv", None),
    ("input", "summarize the data from my spreadsheet", None),
    ("input", "I uploaded a spreadsheet; export it as csv", "csv"),
    ("input", "I uploaded a sales json", None),  # one adjective between
    ("input", "check the data and create a csv", "csv"),
    ("input", "in the spreadsheet, find the outliers", None),
    # a format the user says they have is the input
    ("input", "I have a csv, make json from it", "json"),
    ("input", "I have a csv. Make json from it", "json"),
    ("input", "we have the csv already, now create the json", "json"),
    ("input", "I've got a json file, make it xml", "xml"),
    ("input", "I have a csv", None),
    ("input", "can I have a csv?", "csv"),  # asking to have one
    ("input", "could we have it in xml?", "xml"),
    ("input", "I'd like to have a csv", "csv"),
    ("input", "Attached is a spreadsheet, fix the formulas", None),
    # the format the data already is in
    ("input", "the data is in json, convert it to csv", "csv"),
    ("input", "it is in xml, give me json", "json"),
    ("input", "the readings are in json; make a csv", "csv"),
    ("input", "I have it in csv, can you make json?", "json"),
    ("input", "The file is in csv format and I need it in json", "json"),
    ("input", "make sure it's in csv", "csv"),  # asks
    ("input", "make sure the data is in csv", "csv"),  # asks, past a determiner
    ("input", "please make sure the readings are in json", "json"),
    ("input", "make sure that all the data is in csv", "csv"),
    ("input", "check that the export is in xml", "xml"),
    ("input", "please ensure the file is in json", "json"),
    ("input", "be sure it's in csv", "csv"),
    ("input", "sure it's in csv", "csv"),  # first in its clause: asks
    ("input", "I'm sure it's in json, make a csv", "csv"),  # who is sure: says, not asks
    ("input", "pretty sure it is in xml, give me json", "json"),
    ("input", "I know that it's in json, make a csv", "csv"),
    ("input", "all the data is in json, make a csv", "csv"),
    ("input", "it should be in csv", "csv"),
    ("input", "can I have it in json?", "json"),
    ("input", "Here's the json, convert it to xml", "xml"),
    ("input", "here is a csv I made. Make it json", "json"),
    # a request for code: the formats after it are what the code reads or writes
    ("code", "Write a Python script that converts json to csv", None),
    ("code", "write a function to export the data to csv", None),
    ("code", "Give me a SQL query that exports to csv", None),
    ("code", "write a bash one-liner to turn the json into csv", None),
    ("code", "Create a Python snippet that saves the readings as json", None),
    ("code", "give me python code to convert this to csv", None),
    ("code", "write an excel macro that sorts the rows", None),
    # ... unless a request of its own follows, or "code" is data
    ("code", "write a script that converts json to csv, and export the readings as xml", "xml"),
    ("code", "write a script for it and then export the data as csv", "csv"),
    ("code", "create a csv and a python script to load it", "csv"),
    ("code", "give me the code for each device as csv", "csv"),
    ("code", "give me the code and the value as csv", "csv"),
    ("code", "export the query results to csv", "csv"),
    # nothing named
    ("none", "", None),
    ("none", "   ", None),
    ("none", "thanks!", None),
    ("none", "Retrieve the BatteryVoltage1 history for instance sat-07", None),
]


def _cases(rule: str) -> list[Any]:
    return [
        pytest.param(text, expected, id=text or "<empty>")
        for r, text, expected in PHRASINGS
        if r == rule
    ]


@pytest.mark.parametrize(("text", "expected"), _cases("seed"))
def test_seed_phrasings_detect_the_seeds_formats(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("named"))
def test_named_format_requests_it(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("unsupported"))
def test_unsupported_formats_are_detected(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("boundary"))
def test_formats_match_only_as_words(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("negation"))
def test_negation_does_not_request(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("question"))
def test_question_about_a_format_does_not_request(
    text: str, expected: RequestFormat | None
) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("polite"))
def test_polite_question_requests(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("first"))
def test_first_mentioned_format_wins(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("correction"))
def test_a_correction_takes_back_the_formats_asked_for_before_it(
    text: str, expected: RequestFormat | None
) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("code"))
def test_a_request_for_code_does_not_request_the_formats_it_handles(
    text: str, expected: RequestFormat | None
) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("excel"))
def test_excel_means_xlsx_unless_csv_is_named(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("none"))
def test_no_format_named_requests_nothing(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


def test_curly_apostrophe_negation_does_not_request() -> None:
    assert detect_format("don\u2019t create a csv") is None


@pytest.mark.parametrize(("text", "expected"), _cases("target"))
def test_conversion_target_wins(text: str, expected: RequestFormat | None) -> None:
    assert detect_format(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("input"))
def test_format_the_user_already_has_is_input_not_a_request(
    text: str, expected: RequestFormat | None
) -> None:
    assert detect_format(text) == expected


# Every pair of produced formats, in every phrasing that refuses or holds the first and
# asks for the second: the second is requested ("excel" is xlsx, csv being refused).
_GIVE_WAY: list[str] = [
    "instead of {a} give me {b}",
    "without {a} give me {b}",
    "rather than {a} use {b}",
    "I don't want {a} I want {b}",
    "don't send {a}, send {b}",
    "forget the {a}, give me {b}",
    "never mind the {a}, create {b}",
    "I have a {a}, make {b} from it",
    "we've already got the {a}. Now create the {b}",
    "here's the {a}, export it as {b}",
]
_PRODUCED: dict[str, RequestFormat] = {
    "csv": "csv",
    "json": "json",
    "xml": "xml",
    "xlsx": "xlsx",
    "excel": "xlsx",
}


@pytest.mark.parametrize("phrasing", _GIVE_WAY)
@pytest.mark.parametrize(
    ("refused", "asked"),
    [(a, b) for a in _PRODUCED for b in _PRODUCED if _PRODUCED[a] != _PRODUCED[b]],
)
def test_a_refused_or_held_format_gives_way_to_the_one_asked_for(
    phrasing: str, refused: str, asked: str
) -> None:
    assert detect_format(phrasing.format(a=refused, b=asked)) == _PRODUCED[asked]


_ASKING_VERBS = [
    "create",
    "export",
    "show",
    "retrieve",
    "fetch",
    "pull",
    "compile",
    "redo",
    "regenerate",
]
_LOOKING_VERBS = ["see", "view", "list", "print", "copy"]


@pytest.mark.parametrize("fmt", ["csv", "json", "xml", "xlsx"])
@pytest.mark.parametrize("verb", _ASKING_VERBS + _LOOKING_VERBS)
def test_a_polite_verb_that_names_what_to_make_requests_it(verb: str, fmt: str) -> None:
    assert detect_format(f"Could you {verb} it as {fmt}?") == fmt


@pytest.mark.parametrize("fmt", ["csv", "json", "xml", "xlsx"])
@pytest.mark.parametrize("verb", _LOOKING_VERBS)
def test_a_polite_verb_of_looking_at_a_file_requests_nothing(verb: str, fmt: str) -> None:
    assert detect_format(f"Could you {verb} the {fmt}?") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ditch the csv", None),
        ("send me the data excluding the json", None),
        ("Forget json, export xml", "xml"),
        ("Not this table as csv", None),  # a negation opening its clause refuses
        ("Skip the header or convert it to xml", "xml"),  # "or" + a verb starts a clause
    ],
)
def test_cancels_and_negations_refuse_only_within_their_clause(
    text: str, expected: RequestFormat | None
) -> None:
    assert detect_format(text) == expected


def test_a_semicolon_ends_a_sentence_so_a_question_before_it_does_not_swallow_a_request() -> None:
    assert detect_format("What is xml; export it as json") == "json"


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("forget the csv", {"csv"}),
        ("don't make a json or an xml", {"json", "xml"}),
        ("never mind the spreadsheet, a csv is fine", {"xlsx"}),
        ("make a csv", set()),
        ("what is a csv?", set()),  # asked about, not refused
    ],
)
def test_refused_formats_are_the_negated_or_cancelled_mentions(
    text: str, refused: set[str]
) -> None:
    assert refused_formats(text) == refused
