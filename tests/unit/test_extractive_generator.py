"""The extractive generator: how sources become sentences, and which sentences an answer quotes and cites.

Selection runs on a deterministic embedder whose vectors count words, so the cosine of two texts grows
with the words they share.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Sequence

import pytest

from retrieval_core.generation.base import Generation, GenerationRequest
from retrieval_core.generation.citations import CitedText, from_native
from retrieval_core.generation.extractive import CHARS_PER_TOKEN, MAX_CANDIDATES, ExtractiveGenerator
from retrieval_core.generation.sentences import (
    MAX_SENTENCE_CHARS,
    Sentence,
    candidates,
    split_sentences,
)
from retrieval_core.search.context_packing import citation_header
from retrieval_core.settings import Settings

_WORD = re.compile(r"\w+")
_STOP_WORDS = {"the", "a", "an", "is", "of", "and", "to", "in", "it", "what", "how", "which", "does", "on"}


class WordCountEmbedder:
    """Vectors of word counts (stop words left out), hashed into 1,024 slots; records every call."""

    model = "word-count"
    dimension = 1024

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        self.calls.append((list(texts), kind))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in _WORD.findall(text.lower()):
                if word not in _STOP_WORDS:
                    vector[zlib.crc32(word.encode()) % self.dimension] += 1.0
            vectors.append(vector)
        return vectors


def _source(title: str, text: str) -> str:
    # As the answer service builds each source: its citation header line, a line break, the chunk.
    return f"{citation_header({'title': title, 'fileName': f'{title.lower()}.md'})}\n{text}"


def _request(question: str, sources: Sequence[str], max_output_tokens: int = 1024) -> GenerationRequest:
    return GenerationRequest(
        system="rules",
        prompt="sources and question",
        question=question,
        sources=sources,
        max_output_tokens=max_output_tokens,
        model="extractive",
    )


# Non-stop words: 4 in each FRUIT sentence, 3 in each TOOLS sentence.
FRUIT = _source(
    "Fruit",
    "Apples grow in temperate orchards. Bananas ripen in warm plantations. Cherries bloom in early spring.",
)
TOOLS = _source("Tools", "Hammers drive nails. Wrenches turn bolts. Saws cut wood.")
# Shares one word with an apples, a bananas and a saws sentence: cosines 0.29, 0.29 and 0.33.
THREE_WAY = "apples bananas wood"


# --- Sentences -----------------------------------------------------------------------------------------


def test_abbreviations_initials_and_numbers_do_not_end_sentences() -> None:
    text = (
        "Dr. Smith wrote the guide, e.g. for admins, in Jan. 2020 for the U.S. Army. See Fig. 3 for the "
        "layout. J. R. Tolkien used version 3.14 of it. The answer was no. Then the review began."
    )
    assert split_sentences(text) == [
        "Dr. Smith wrote the guide, e.g. for admins, in Jan. 2020 for the U.S. Army.",
        "See Fig. 3 for the layout.",
        "J. R. Tolkien used version 3.14 of it.",
        "The answer was no.",
        "Then the review began.",
    ]


def test_exclamations_questions_ellipses_quotes_and_a_missing_space_end_sentences() -> None:
    text = (
        'Is the pump running?! It stopped at noon... "Check the valve first." '
        "Then call the team.Next reset the pump."
    )
    assert split_sentences(text) == [
        "Is the pump running?!",
        "It stopped at noon...",
        '"Check the valve first."',
        "Then call the team.",
        "Next reset the pump.",
    ]


def test_a_lowercase_word_after_a_full_stop_continues_the_sentence() -> None:
    assert split_sentences("The valve opened at 5 p.m. and the pressure fell. It rose again.") == [
        "The valve opened at 5 p.m. and the pressure fell.",
        "It rose again.",
    ]


def test_cjk_full_stops_end_sentences_without_spaces() -> None:
    assert split_sentences("東京は日本の首都です。人口はとても多い！本当にそうですか？Tokyo is large.") == [
        "東京は日本の首都です。",
        "人口はとても多い！",
        "本当にそうですか？",
        "Tokyo is large.",
    ]
    assert split_sentences("这是第一句话。这是第二句话.这是第三句话") == [
        "这是第一句话。",
        "这是第二句话.",
        "这是第三句话",
    ]


def test_the_citation_header_is_never_a_sentence() -> None:
    header = citation_header({"title": "Runbook. Read it first.", "pageNumber": 3, "section": "Pumps"})
    assert split_sentences(header) != []  # the header alone reads as text ...
    sentences = candidates([f"{header}\nThe pump needs oil every week.", header + "\n"], MAX_CANDIDATES)
    assert [s.text for s in sentences] == ["The pump needs oil every week."]  # ... but never as a source's


def test_wrapped_lines_join_and_headings_and_titles_are_left_out() -> None:
    text = (
        "# Pump maintenance\n"
        "Oiling the pump\n"
        "The pump needs oil every week, more often\n"
        "when it runs hot. Use the grade on its label.\n"
        "\n"
        "Replacing the seal\n"
        "==================\n"
        "Seals wear out after about a year of service.\n"
        "Short title here\n"
        "\n"
        "Key: value lines stay as text\n"
        "\n"
        "Ordering parts\n"
        "The seals were made by\n"
        "General Electric in Boston.\n"
    )
    assert split_sentences(text) == [
        "The pump needs oil every week, more often when it runs hot.",
        "Use the grade on its label.",
        "Seals wear out after about a year of service.",
        "Key: value lines stay as text",
        "The seals were made by General Electric in Boston.",
    ]


def test_list_items_and_table_rows_are_sentences_of_their_own() -> None:
    text = (
        "Before you start:\n"
        "- Drain the pump completely\n"
        "- Close both valves and wait\n"
        "  until the gauge reads zero\n"
        "1. Remove the cover plate\n"
        "| Part | Interval |\n"
        "|------|:--------:|\n"
        "| Seal kit | 12 months |\n"
    )
    assert split_sentences(text) == [
        "Before you start:",
        "Drain the pump completely",
        "Close both valves and wait until the gauge reads zero",
        "Remove the cover plate",
        "Seal kit | 12 months",
    ]


def test_long_sentences_are_cut_at_the_bound_after_a_clause_when_one_is_near() -> None:
    clause = "the operator checks the gauge and writes the reading in the log"
    sentence = ", ".join([clause] * 20) + "."
    pieces = split_sentences(sentence)
    assert len(pieces) > 1
    assert all(len(p) <= MAX_SENTENCE_CHARS for p in pieces)
    assert all(p.endswith(",") for p in pieces[:-1])
    assert " ".join(pieces) == sentence
    unspaced = "字" * (2 * MAX_SENTENCE_CHARS + 10)
    assert [len(p) for p in split_sentences(unspaced)] == [MAX_SENTENCE_CHARS, MAX_SENTENCE_CHARS, 10]


@pytest.mark.parametrize(
    "text",
    [
        "." * 100_000,
        "!" * 100_000 + "東",
        "." + '"' * 100_000,
        "a. B" * 25_000,
        "[1" * 50_000,
        "word " * 20_000,
    ],
)
def test_splitting_reads_long_runs_of_punctuation_once(text: str) -> None:
    # Read once per character, 100,000 characters take milliseconds; read again from each one, minutes.
    started = time.perf_counter()
    sentences = split_sentences(text)
    assert time.perf_counter() - started < 2.0
    assert all(len(s) <= MAX_SENTENCE_CHARS for s in sentences)


def test_fragments_of_fewer_than_three_words_are_left_out() -> None:
    assert split_sentences("Yes. Page 12. The pump is fine now.") == ["The pump is fine now."]


def test_bracketed_reference_numbers_are_removed_so_they_never_read_as_citations() -> None:
    assert split_sentences("The pump was patented in 1902 [12][13]. It still runs [2, 3].") == [
        "The pump was patented in 1902.",
        "It still runs.",
    ]


def test_identical_sentences_are_kept_once_at_their_first_source() -> None:
    first = _source("One", "The pump needs oil every week. It is quiet.")
    second = _source("Two", "THE pump needs oil   every week. It hums when it runs.")
    assert candidates([first, second], MAX_CANDIDATES) == [
        Sentence(1, 0, "The pump needs oil every week."),
        Sentence(1, 1, "It is quiet."),
        Sentence(2, 0, "It hums when it runs."),
    ]
    assert len(candidates([first, second], 2)) == 2


def marked(generation: Generation) -> str:
    """The answer as a model citing by markers would write it: each cited span followed by ` [n]`."""
    text, pieces, last = generation.text, [], 0
    for citation in generation.native_citations or []:
        pieces += [text[last : citation.end], "".join(f" [{n}]" for n in citation.sources)]
        last = citation.end
    return "".join(pieces) + text[last:]


def cited_of(generation: Generation, source_count: int) -> CitedText:
    """What the answer service makes of the generation: its text and checked citations."""
    return from_native(generation.text, generation.native_citations or [], source_count)


# --- Selection -----------------------------------------------------------------------------------------


def test_the_answer_is_the_best_sentence_cited_by_its_source() -> None:
    generator = ExtractiveGenerator(WordCountEmbedder(), max_sentences=4)
    generation = generator.generate(_request("Which tool turns bolts?", [FRUIT, TOOLS]))
    assert marked(generation) == "Wrenches turn bolts. [2]"
    assert generation.model == "extractive"
    assert (generation.input_tokens, generation.output_tokens) == (None, None)
    cited = cited_of(generation, 2)
    assert cited.text == "Wrenches turn bolts."
    assert [(c.start, c.end, c.sources) for c in cited.citations] == [(0, len(cited.text), (2,))]


def test_chosen_sentences_read_in_source_order_each_with_its_own_citation() -> None:
    # Best first, the saws sentence (source 2) would lead.
    generation = ExtractiveGenerator(WordCountEmbedder(), max_sentences=4).generate(
        _request(THREE_WAY, [FRUIT, TOOLS])
    )
    assert marked(generation) == (
        "Apples grow in temperate orchards. [1] Bananas ripen in warm plantations. [1] Saws cut wood. [2]"
    )
    cited = cited_of(generation, 2)
    assert [(cited.text[c.start : c.end], c.sources) for c in cited.citations] == [
        ("Apples grow in temperate orchards.", (1,)),
        ("Bananas ripen in warm plantations.", (1,)),
        ("Saws cut wood.", (2,)),
    ]


@pytest.mark.parametrize(("max_sentences", "expected"), [(1, ["Saws"]), (2, ["Apples", "Saws"])])
def test_at_most_answer_max_sentences_are_chosen_the_best_ones(
    max_sentences: int, expected: list[str]
) -> None:
    generator = ExtractiveGenerator(WordCountEmbedder(), max_sentences=max_sentences)
    cited = cited_of(generator.generate(_request(THREE_WAY, [FRUIT, TOOLS])), 2)
    assert [cited.text[c.start : c.end].split()[0] for c in cited.citations] == expected


def test_sentences_far_below_the_best_one_are_left_out() -> None:
    # Saws: 2 words shared, cosine 0.67; apples: 1 word, 0.29, above MIN_SIMILARITY but below 0.8 x 0.67.
    request = _request("apples wood saws", [FRUIT, TOOLS])
    generation = ExtractiveGenerator(WordCountEmbedder()).generate(request)
    assert marked(generation) == "Saws cut wood. [2]"


def test_one_embedding_call_of_the_question_and_a_bounded_number_of_sentences() -> None:
    embedder = WordCountEmbedder()
    many = [
        _source(f"Log {n}", f"Entry {n} reports pump pressure {n} bar. Entry {n} was checked.")
        for n in range(150)
    ]
    ExtractiveGenerator(embedder).generate(_request("pump pressure 7 bar", many))
    assert len(embedder.calls) == 1
    texts, kind = embedder.calls[0]
    assert texts[0] == "pump pressure 7 bar"
    assert len(texts) == MAX_CANDIDATES + 1
    assert texts[1:3] == ["Entry 0 reports pump pressure 0 bar.", "Entry 0 was checked."]
    assert kind == "document"


def test_the_output_bound_leaves_sentences_out_whole() -> None:
    generator = ExtractiveGenerator(WordCountEmbedder(), max_sentences=4)
    assert generator.generate(_request(THREE_WAY, [FRUIT, TOOLS])).stop_reason == "end_turn"
    # 20 characters: the best sentence with its marker (18), not the next one as well.
    bounded = generator.generate(_request(THREE_WAY, [FRUIT, TOOLS], max_output_tokens=20 // CHARS_PER_TOKEN))
    assert (marked(bounded), bounded.stop_reason) == ("Saws cut wood. [2]", "max_tokens")
    nothing = generator.generate(_request(THREE_WAY, [FRUIT, TOOLS], max_output_tokens=1))
    assert (nothing.text, nothing.stop_reason) == ("", "max_tokens")


def test_nothing_usable_gives_an_empty_answer_without_embedding() -> None:
    embedder = WordCountEmbedder()
    generator = ExtractiveGenerator(embedder)
    only_headers = [_source("Pump", ""), _source("Valve", "# Valves\nValve basics")]
    assert generator.generate(_request("How do valves work?", only_headers)).text == ""
    assert generator.generate(_request("   ", [FRUIT])).text == ""
    assert embedder.calls == []


def test_a_question_no_sentence_resembles_gets_an_empty_answer() -> None:
    generator = ExtractiveGenerator(WordCountEmbedder())
    assert generator.generate(_request("volcano eruption", [FRUIT, TOOLS])).text == ""


def test_a_list_item_without_a_full_stop_ends_its_line() -> None:
    steps = "- Drain the pump completely\n- Close both pump valves\n- Call the pump team today"
    generation = ExtractiveGenerator(WordCountEmbedder()).generate(
        _request("drain close call pump", [_source("Steps", steps)])
    )
    assert marked(generation) == (
        "Drain the pump completely [1]\nClose both pump valves [1]\nCall the pump team today [1]"
    )
    cited = cited_of(generation, 1)
    assert [cited.text[c.start : c.end] for c in cited.citations] == [
        "Drain the pump completely",
        "Close both pump valves",
        "Call the pump team today",
    ]


def test_stream_yields_each_sentence_then_the_generation() -> None:
    generator = ExtractiveGenerator(WordCountEmbedder(), max_sentences=4)
    request = _request(THREE_WAY, [FRUIT, TOOLS])
    *deltas, last = list(generator.stream(request))
    assert isinstance(last, Generation)
    assert deltas == [
        "Apples grow in temperate orchards.",
        " Bananas ripen in warm plantations.",
        " Saws cut wood.",
    ]
    whole = generator.generate(request)
    assert "".join(str(d) for d in deltas) == last.text == whole.text
    assert last.native_citations == whole.native_citations


def test_from_settings_takes_answer_max_sentences() -> None:
    settings = Settings(_env_file=None, answer_max_sentences=1)
    generator = ExtractiveGenerator.from_settings(settings, WordCountEmbedder())
    assert (generator.provider, generator.model) == ("extractive", "extractive")
    assert marked(generator.generate(_request(THREE_WAY, [FRUIT, TOOLS]))) == "Saws cut wood. [2]"


def test_a_sentence_with_an_abbreviation_is_cited_whole() -> None:
    doctor = _source("Rota", "Dr. Smith approves every pump repair. Apples are red.")
    generation = ExtractiveGenerator(WordCountEmbedder()).generate(
        _request("who approves pump repair", [doctor])
    )
    cited = cited_of(generation, 1)
    assert [cited.text[c.start : c.end] for c in cited.citations] == ["Dr. Smith approves every pump repair."]
