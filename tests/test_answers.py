"""Final-answer extraction shared by the families: where answers are, and whether there is one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gym_sysmath.answers import MAX_VALUE_CHARS, choose_answer, find_answers, strip_think, unwrap


def _int_or_none(raw: str) -> int | None:
    try:
        return int(unwrap(raw))
    except ValueError:
        return None


# --- reasoning blocks -------------------------------------------------------------------------


def test_think_block_is_removed():
    assert strip_think("a<think>secret</think>b") == "ab"


def test_thinking_tag_variant_and_case_are_removed():
    assert strip_think("a<THINKING>x</Thinking>b") == "ab"


def test_unclosed_think_hides_the_rest_of_the_text():
    assert strip_think("before<think>ANSWER: 5") == "before"


def test_leading_close_tag_closes_an_implicit_block():
    assert strip_think("reasoning ANSWER: 5\n</think>\nANSWER: 6") == "\nANSWER: 6"


def test_stray_close_after_a_block_is_only_dropped():
    assert strip_think("<think>x</think>A</think>B") == "AB"


def test_answer_rehearsed_inside_think_is_not_found():
    assert find_answers("<think>ANSWER: 1\nANSWER: 2</think>\nANSWER: 3") == ["3"]


# --- locating values --------------------------------------------------------------------------


def test_no_answer_line_gives_no_values():
    assert find_answers("The result is 42.") == []


def test_mid_sentence_answer_is_prose():
    assert find_answers("My answer: 42 I think") == []


def test_every_answer_line_is_found_in_order():
    assert find_answers("ANSWER: 1\ntext\nANSWER: 2\nFINAL ANSWER: 3") == ["1", "2", "3"]
    assert find_answers("Answer: 1\ntext\nanswer: 2\nFinal Answer: 3") == ["1", "2", "3"]


def test_uppercase_answer_lines_win_over_lenient_labels():
    assert find_answers("ANSWER: 1\ntext\nanswer: 2\nFinal Answer: 3") == ["1"]


def test_markdown_decorated_answer_lines_are_found():
    text = "**ANSWER:** 1\n### ANSWER: 2\n> ANSWER: 3\n- **ANSWER**: 4\n**ANSWER: 5**"
    assert [unwrap(v) for v in find_answers(text)] == ["1", "2", "3", "4", "5"]
    assert unwrap(find_answers("- **Answer**: 4")[0]) == "4"


def test_multi_line_value_is_joined_while_brackets_are_open():
    text = "ANSWER: [[1, 2],\n [3, 4]]\nDone."
    assert find_answers(text) == ["[[1, 2],\n [3, 4]]"]


def test_value_on_the_next_line_is_taken_when_the_line_is_empty():
    assert find_answers("ANSWER:\n\n```\n[[1, 2],\n [3, 4]]\n```\n") == ["[[1, 2],\n [3, 4]]"]


def test_latex_environment_spans_lines_until_it_ends():
    text = "ANSWER: $\\begin{pmatrix}\n1 & 2 \\\\\n3 & 4\n\\end{pmatrix}$\nbye"
    assert find_answers(text) == ["$\\begin{pmatrix}\n1 & 2 \\\\\n3 & 4\n\\end{pmatrix}$"]


def test_unbalanced_value_stops_at_the_next_answer_line():
    assert find_answers("ANSWER: [1, 2\nANSWER: [1, 2]") == ["[1, 2", "[1, 2]"]


def test_unbalanced_value_is_capped():
    values = find_answers("ANSWER: [" + "\n1," * 10_000)
    assert len(values) == 1 and len(values[0]) <= MAX_VALUE_CHARS


def test_placeholder_restating_the_instructions_is_dropped():
    assert find_answers("Format: end with\nANSWER: <value>\n\nANSWER: 7") == ["7"]


# --- wrappers ---------------------------------------------------------------------------------


def test_unwrap_strips_markdown_and_latex_wrappers():
    for wrapped in ["**6**", "`6`", "$6$", "$$6$$", "\\(6\\)", "\\[6\\]", "\\boxed{6}", "$\\boxed{6}$", '"6"', "6."]:
        assert unwrap(wrapped) == "6", wrapped


def test_unwrap_keeps_inner_braces_of_a_boxed_matrix():
    assert unwrap("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"


def test_unwrap_leaves_a_partial_boxed_alone():
    assert unwrap("\\boxed{1} + \\boxed{2}") == "\\boxed{1} + \\boxed{2}"


# --- one answer or several --------------------------------------------------------------------


def test_choice_missing_when_no_values():
    assert choose_answer([], _int_or_none).status == "missing"


def test_choice_one_when_the_same_value_repeats():
    choice = choose_answer(["6", "**6**", "6"], _int_or_none)
    assert (choice.status, choice.value, choice.count) == ("one", 6, 3)


def test_choice_several_when_values_differ():
    assert choose_answer(["6", "7"], _int_or_none).status == "several"


def test_choice_several_when_an_unreadable_value_sits_beside_a_readable_one():
    assert choose_answer(["six", "6"], _int_or_none).status == "several"


def test_choice_unparseable_when_nothing_reads():
    choice = choose_answer(["six"], _int_or_none)
    assert (choice.status, choice.raw) == ("unparseable", "six")


def test_choice_uses_the_given_sameness():
    same_parity = choose_answer(["2", "4"], _int_or_none, same=lambda a, b: a % 2 == b % 2)
    assert same_parity.status == "one"


@given(st.text())
def test_extraction_never_raises(text):
    for value in find_answers(text):
        assert isinstance(unwrap(value), str)


@given(st.lists(st.sampled_from(["ANSWER:", "<think>", "</think>", "[", "]", "(", "\n", "$$", "1", " "])))
def test_extraction_never_raises_on_structural_noise(parts):
    assert all(isinstance(v, str) for v in find_answers("".join(parts)))


#: End-of-turn tokens of chat templates in use (Qwen/ChatML, Llama 3, Phi/harmony, Mistral/Llama 2,
#: Gemma, GPT-2/OLMo, Cohere, DeepSeek, SmolVLM/Idefics3, Seed-OSS, MiniMax-Text-01, MiniMax-M2).
END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|return|>", "</s>", "<end_of_turn>", "<eos>",
              "<|endoftext|>", "<|END_OF_TURN_TOKEN|>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
              "<end_of_utterance>", "<seed:eos>", "<end_of_sentence>", "[e~[")


@given(st.lists(st.sampled_from(END_TOKENS), min_size=1, max_size=3), st.sampled_from(["", " ", "\n", "\n\n"]))
def test_every_common_end_of_turn_token_after_an_answer_is_stripped(tokens, gap):
    from gym_sysmath.answers import strip_end_tokens

    text = "Reasoning.\nANSWER: [3, \"0x3\"]" + gap + gap.join(tokens) + gap
    assert strip_end_tokens(text) == "Reasoning.\nANSWER: [3, \"0x3\"]"
    assert find_answers(strip_end_tokens(text)) == ['[3, "0x3"]']  # what the env's reader does
