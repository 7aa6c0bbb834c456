#!/usr/bin/env python3
"""Builds tests/data/judge_pairs.jsonl: labelled (reference, candidate) answer pairs for
the rule-based answer check (`tmas judge --pairs`, tests/judge_table.rs).

References are IMO-AnswerBench v2 short answers (CC-BY 4.0, Google LLC; see NOTICE.md in
this folder). Candidates are written by hand below, or derived from integer references by
fixed rules whose label follows from the rule (thousands separators are equivalent, N+1
is not). Every hand-written label was checked by a person reading both answers.

Usage (only needed to regenerate; the tests read the committed JSONL, never this CSV):

    python3 tests/data/make_judge_pairs.py /path/to/answerbench_v2.csv > tests/data/judge_pairs.jsonl
    python3 tests/data/make_judge_pairs.py /path/to/answerbench_v2.csv --heldout > tests/data/judge_pairs_heldout.jsonl
"""

import csv
import json
import sys

EQ, NE = True, False

# (problem id, answer type, [(candidate, equivalent?, kind), ...]).
# The reference is the CSV's Short Answer for that id (trimmed).
HAND = [
    ("imo-bench-algebra-002", "expression", [
        (r"\lfloor \log_2 a \rfloor + 1", EQ, "latex_cosmetics"),
        (r"1+\left\lfloor \log_{2} a\right\rfloor", EQ, "reordered_sum"),
        (r"\lfloor \log_2 a \rfloor", NE, "constant_offset"),
        (r"\lceil \log_2 a \rceil + 1", NE, "floor_vs_ceiling"),
    ]),
    ("imo-bench-algebra-003", "function", [
        (r"g(x)=-2x^3+c, g(x)=2x^3+c", EQ, "reordered_list"),
        (r"f(x)=2x^{3}+c, f(x)=-2x^{3}+c", EQ, "renamed_function"),
        (r"g(t)=2t^3+c, g(t)=-2t^3+c", EQ, "renamed_dummy_variable"),
        (r"g(x)=2x^{3}+c", NE, "missing_element"),
        (r"g(x)=2x^{3}+c, g(x)=-2x^{3}-c", EQ, "sign_flip_of_free_constant"),
        (r"g(x)=2x^{2}+c, g(x)=-2x^{2}+c", NE, "wrong_exponent"),
    ]),
    ("imo-bench-algebra-004", "expression", [
        (r"2^{u - 2}", EQ, "latex_cosmetics"),
        (r"\frac{2^u}{4}", EQ, "algebraic_rewrite"),
        (r"2^{u-1}", NE, "off_by_one"),
        (r"2^{u+2}", NE, "sign_flip"),
        (r"2^{U-2}", NE, "case_of_symbol"),
    ]),
    ("imo-bench-algebra-006", "function", [
        (r"P(x)=x+1, P(x)=-1", EQ, "reordered_list"),
        (r"P(x) = 1 + x \text{ and } P(x) = -1", EQ, "text_and_list"),
        (r"Q(y)=y+1, Q(y)=-1", EQ, "renamed_function_and_variable"),
        (r"P(x)=x+1", NE, "missing_element"),
        (r"P(x)=x-1, P(x)=-1", NE, "sign_flip"),
        (r"P(x)=-1, P(x)=x+1, P(x)=0", NE, "extra_element"),
    ]),
    ("imo-bench-algebra-008", "fraction", [
        (r"-\dfrac{2023}{4096576}", EQ, "numeric_form"),
        (r"\frac{-2023}{2024^{2}}", EQ, "sign_placement"),
        (r"\frac{2023}{2024^2}", NE, "sign_flip"),
        (r"-\frac{2024}{2023^2}", NE, "similar_fraction"),
        (r"-0.000493", NE, "rounded_decimal"),
    ]),
    ("imo-bench-algebra-009", "radical", [
        (r"2 \sqrt[3]{196/13}", EQ, "latex_cosmetics"),
        (r"\sqrt[3]{\frac{1568}{13}}", EQ, "numeric_form"),
        (r"2\sqrt{\frac{196}{13}}", NE, "wrong_root"),
        (r"4.939", NE, "rounded_decimal"),
    ]),
    ("imo-bench-algebra-010", "set", [
        (r"\left\{-\tfrac23, 0, \tfrac23\right\}", EQ, "latex_cosmetics"),
        (r"0, \pm\frac{2}{3}", EQ, "plus_minus"),
        (r"\frac{2}{3}, -\frac{2}{3}, 0", EQ, "reordered_set"),
        (r"-\frac{2}{3}, \frac{2}{3}", NE, "missing_element"),
        (r"-\frac{3}{2}, 0, \frac{3}{2}", NE, "similar_fraction"),
    ]),
    ("imo-bench-algebra-011", "expression", [
        (r"-2m+2", EQ, "reordered_sum"),
        (r"2(1-m)", EQ, "factored"),
        (r"2m-2", NE, "sign_flip"),
        (r"2-2n", NE, "different_variable"),
    ]),
    ("imo-bench-algebra-014", "expression", [
        (r"2025^2a^2 - 2025^2 a", EQ, "expanded"),
        (r"4100625a(a-1)", EQ, "numeric_form"),
        (r"2025^2 a(a+1)", NE, "sign_flip"),
        (r"2025 a(a-1)", NE, "wrong_constant"),
    ]),
    ("imo-bench-algebra-017", "interval", [
        (r"(-\infty, 0) \cup \left\{\frac{1}{2}\right\}", EQ, "latex_cosmetics"),
        (r"\{\tfrac12\}\cup(-\infty,0)", EQ, "reordered_union"),
        (r"(-\infty,0]\cup\{\frac{1}{2}\}", NE, "open_vs_closed"),
        (r"(-\infty,0)", NE, "missing_element"),
        (r"(-\infty,\frac{1}{2}]", NE, "different_set"),
    ]),
    ("imo-bench-algebra-018", "set", [
        (r"\{2030, 2026\}", EQ, "reordered_set"),
        (r"2026 \text{ and } 2030", EQ, "text_and_list"),
        (r"2026, 2029", NE, "off_by_one"),
        (r"2026", NE, "missing_element"),
    ]),
    ("imo-bench-algebra-020", "function", [
        (r"P(x) = c + 2x^2", EQ, "reordered_sum"),
        (r"P(t)=2t^2+c", EQ, "renamed_dummy_variable"),
        (r"P(x)=2x^{2}", NE, "missing_constant"),
        (r"P(x)=x^{2}+c", NE, "wrong_coefficient"),
    ]),
    ("imo-bench-algebra-021", "integer", [
        (r"-768.", EQ, "trailing_period"),
        (r"-3\cdot 2^8", EQ, "unevaluated"),
        (r"768", NE, "sign_flip"),
        (r"-767", NE, "off_by_one"),
    ]),
    ("imo-bench-algebra-025", "function", [
        (r"A(x)=1+2x, A(x)=1-x^2, A(x)=1-x", EQ, "reordered_list"),
        (r"A(x)=1-x, A(x)=2x+1, A(x)=-x^2+1", EQ, "reordered_sum"),
        (r"A(x)=1-x, A(x)=1+2x", NE, "missing_element"),
        (r"A(x)=1-x, A(x)=1+2x, A(x)=1+x^{2}", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-027", "interval", [
        (r"\left(-\infty,-4\right)\cup\left(-4,-\tfrac{8}{3}\right)", EQ, "latex_cosmetics"),
        (r"(-4,-\frac83)\cup(-\infty,-4)", EQ, "reordered_union"),
        (r"(-\infty,-\frac{8}{3})", NE, "missing_hole"),
        (r"(-\infty,-4)\cup(-4,-\frac{8}{3}]", NE, "open_vs_closed"),
    ]),
    ("imo-bench-algebra-028", "interval", [
        (r"\left(-\infty, 0\right]", EQ, "latex_cosmetics"),
        (r"x \le 0", EQ, "inequality_form"),
        (r"(-\infty, 0)", NE, "open_vs_closed"),
        (r"[0, \infty)", NE, "different_set"),
    ]),
    ("imo-bench-algebra-033", "tuple", [
        (r"\left(4,1,2,5,134,718240\right)", EQ, "latex_cosmetics"),
        (r"(4, 1, 2, 5, 134, 718\,240)", EQ, "thin_space_thousands"),
        (r"(1, 4, 2, 5, 134, 718240)", NE, "swapped_tuple_order"),
        (r"(4, 1, 2, 5, 134, 718241)", NE, "off_by_one"),
    ]),
    ("imo-bench-algebra-035", "function", [
        (r"f(x)=0, f(x)=-1, f(x)=2x^2+bx", EQ, "reordered_list"),
        (r"f(x)=-1, f(x)=bx+2x^{2}, f(x)=0", EQ, "reordered_sum"),
        (r"f(x)=-1, f(x)=2x^{2}+bx", NE, "missing_element"),
        (r"f(x)=1, f(x)=2x^{2}+bx, f(x)=0", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-040", "function", [
        (r"f(x) = 1 + x", EQ, "reordered_sum"),
        (r"g(t)=t+1", EQ, "renamed_function_and_variable"),
        (r"f(n)=n+1", EQ, "renamed_dummy_variable"),
        (r"f(x)=x-1", NE, "sign_flip"),
        (r"f(x)=x", NE, "constant_offset"),
    ]),
    ("imo-bench-algebra-042", "fraction", [
        (r"\dfrac{685}{176302}", EQ, "latex_cosmetics"),
        (r"685/176302", EQ, "slash_fraction"),
        (r"\frac{685}{176301}", NE, "similar_fraction"),
        (r"0.003885", NE, "rounded_decimal"),
    ]),
    ("imo-bench-algebra-043", "radical", [
        (r"-1+\sqrt2", EQ, "reordered_sum"),
        (r"\frac{1}{\sqrt{2}+1}", EQ, "rationalized"),
        (r"\sqrt{2}+1", NE, "sign_flip"),
        (r"0.41421356", NE, "rounded_decimal"),
    ]),
    ("imo-bench-algebra-044", "fraction", [
        (r"4.5", EQ, "decimal_form"),
        (r"4\frac{1}{2}", EQ, "mixed_number"),
        (r"\frac{2}{9}", NE, "inverted_fraction"),
        (r"\frac{9}{2}.", EQ, "trailing_period"),
    ]),
    ("imo-bench-algebra-045", "radical", [
        (r"\frac{17458}{23769}+\frac{2970\sqrt{5}}{23769}", EQ, "expanded"),
        (r"\frac{17458-2970\sqrt{5}}{23769}", NE, "sign_flip"),
        (r"\frac{17458+2970\sqrt{3}}{23769}", NE, "similar_radical"),
    ]),
    ("imo-bench-algebra-046", "fraction", [
        (r"-3.\overline{3}", EQ, "repeating_decimal"),
        (r"-3\frac{1}{3}", EQ, "mixed_number"),
        (r"-3.333", NE, "rounded_decimal"),
        (r"\frac{10}{3}", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-047", "function", [
        (r"A(x)=\frac{x^2-x-4}{2}", EQ, "algebraic_rewrite"),
        (r"A(x) = \frac{1}{2}x^2 - \frac{1}{2}x - 2", EQ, "expanded"),
        (r"A(x)=\frac{1}{2}(x^2+x-4)", NE, "sign_flip"),
        (r"A(x)=\frac{1}{2}(x^2-x-2)", NE, "constant_offset"),
    ]),
    ("imo-bench-algebra-048", "interval", [
        (r"\left[-6, 5\right]", EQ, "latex_cosmetics"),
        (r"-6 \le x \le 5", EQ, "inequality_form"),
        (r"(-6,5]", NE, "open_vs_closed"),
        (r"[-6,5)", NE, "open_vs_closed"),
        (r"[-5,6]", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-049", "fraction", [
        (r"\frac{32}{54}", EQ, "unreduced_fraction"),
        (r"0.\overline{592}", EQ, "repeating_decimal"),
        (r"0.592", NE, "rounded_decimal"),
        (r"\frac{16}{25}", NE, "similar_fraction"),
    ]),
    ("imo-bench-algebra-051", "prose", [
        (r"all odd $n$", EQ, "prose_rewording"),
        (r"odd n", EQ, "latex_cosmetics"),
        (r"$n$ is odd", EQ, "prose_rewording"),
        (r"even $n$", NE, "prose_opposite"),
        (r"all $n$", NE, "prose_broader"),
    ]),
    ("imo-bench-algebra-053", "interval", [
        (r"(-\infty,-3)\cup(-3,+\infty)", EQ, "latex_cosmetics"),
        (r"\mathbb{R} \setminus \{-3\}", EQ, "set_difference"),
        (r"(-\infty,-3]\cup(-3,\infty)", NE, "open_vs_closed"),
        (r"(-\infty,3)\cup(3,\infty)", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-057", "set", [
        (r"\{0.5, 1, 2\}", EQ, "numeric_form"),
        (r"2, 1, \frac{1}{2}", EQ, "reordered_set"),
        (r"\frac12, 2", NE, "missing_element"),
        (r"\frac12, 1, 2, 4", NE, "extra_element"),
    ]),
    ("imo-bench-algebra-060", "fraction", [
        (r"\frac{2617}{2618}", EQ, "latex_cosmetics"),
        (r"1-\frac{1}{2618}", EQ, "unevaluated"),
        (r"\frac{2618}{2617}", NE, "inverted_fraction"),
        (r"0.99962", NE, "rounded_decimal"),
    ]),
    ("imo-bench-algebra-064", "integer", [
        (r"x=-3", EQ, "assignment"),
        (r"3", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-065", "interval", [
        (r"(0,1)", EQ, "interval_form"),
        (r"c \in (0, 1)", EQ, "membership"),
        (r"0 \le c < 1", NE, "open_vs_closed"),
        (r"(0,1]", NE, "open_vs_closed"),
    ]),
    ("imo-bench-algebra-066", "set", [
        (r"995018, 995026, 997008", EQ, "reordered_set"),
        (r"997{,}008, 995{,}026, 995{,}018", EQ, "braced_comma_thousands"),
        (r"997\,008,\ 995\,026,\ 995\,018", EQ, "thin_space_thousands"),
        (r"997008, 995026", NE, "missing_element"),
        (r"997008, 995026, 995019", NE, "off_by_one"),
    ]),
    ("imo-bench-algebra-067", "tuple", [
        (r"\left(2, \tfrac12, \tfrac94\right)", EQ, "latex_cosmetics"),
        (r"(2, 0.5, 2.25)", EQ, "decimal_form"),
        (r"(\frac{1}{2}, 2, \frac{9}{4})", NE, "swapped_tuple_order"),
        (r"(2, \frac{1}{2}, \frac{4}{9})", NE, "inverted_fraction"),
    ]),
    ("imo-bench-algebra-072", "interval", [
        (r"x \ge -1.2", EQ, "decimal_form"),
        (r"[-\frac{6}{5}, \infty)", EQ, "interval_form"),
        (r"x > -\frac{6}{5}", NE, "open_vs_closed"),
        (r"x \le -\frac{6}{5}", NE, "reversed_inequality"),
    ]),
    ("imo-bench-algebra-074", "set", [
        (r"\{3,4\}", EQ, "braced_set"),
        (r"4, 3", EQ, "reordered_set"),
        (r"3", NE, "missing_element"),
        (r"3, 5", NE, "off_by_one"),
    ]),
    ("imo-bench-algebra-079", "function", [
        (r"g(n)=n-1", EQ, "latex_cosmetics"),
        (r"g(m) = m - 1", EQ, "renamed_dummy_variable"),
        (r"n-1", EQ, "right_hand_side_only"),
        (r"g(n)=n+1", NE, "sign_flip"),
        (r"g(n)=1-n", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-081", "relation", [
        (r"n = 3 + 4k", EQ, "reordered_sum"),
        (r"4k+3", EQ, "right_hand_side_only"),
        (r"n=4k+1", NE, "constant_offset"),
        (r"n=4k-3", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-084", "function", [
        (r"Q(x)=c(x-1)^{2}(x+2)(x-4)", EQ, "reordered_factors"),
        (r"Q(x) = c(x^2-2x+1)(x^2-2x-8)", EQ, "expanded"),
        (r"Q(x)=c(x-1)(x-4)(x+2)", NE, "missing_factor"),
        (r"Q(x)=c(x+1)^2(x-4)(x+2)", NE, "sign_flip"),
    ]),
    ("imo-bench-algebra-086", "interval", [
        (r"(0, \frac{4}{9}]", EQ, "interval_form"),
        (r"k \in \left(0, \tfrac49\right]", EQ, "membership"),
        (r"0 < k < \frac{4}{9}", NE, "open_vs_closed"),
        (r"(0, \frac{9}{4}]", NE, "inverted_fraction"),
    ]),
    ("imo-bench-algebra-088", "fraction", [
        (r"0.\overline{142857}", EQ, "repeating_decimal"),
        (r"0.142857", NE, "rounded_decimal"),
        (r"\frac{1}{6}", NE, "similar_fraction"),
        (r"1/7", EQ, "slash_fraction"),
    ]),
    ("imo-bench-algebra-089", "expression", [
        (r"1+2^{2024}", EQ, "reordered_sum"),
        (r"2^{2024}-1", NE, "sign_flip"),
        (r"2^{2023}+1", NE, "off_by_one"),
        (r"4^{1012}+1", EQ, "numeric_form"),
    ]),
    ("imo-bench-algebra-090", "set", [
        (r"60\,750,\ 854\,130,\ 854\,970", EQ, "thin_space_thousands"),
        (r"854970, 854130, 60750", EQ, "reordered_set"),
        (r"60750, 854130", NE, "missing_element"),
        (r"60750, 854130, 854971", NE, "off_by_one"),
    ]),
    ("imo-bench-algebra-096", "expression", [
        (r"4 \times 3^{2023}", EQ, "latex_cosmetics"),
        (r"4(3^{2023})", EQ, "latex_cosmetics"),
        (r"4\cdot 3^{2022}", NE, "off_by_one"),
        (r"3\cdot 4^{2023}", NE, "swapped"),
        (r"12^{2023}", NE, "wrong_simplification"),
    ]),
    ("imo-bench-combinatorics-011", "decimal", [
        (r"\frac{1}{2}", EQ, "fraction_form"),
        (r"50\%", EQ, "percent"),
        (r"0.50", EQ, "trailing_zero"),
        (r"0.05", NE, "similar_decimal"),
        (r"\frac{1}{3}", NE, "similar_fraction"),
    ]),
    ("imo-bench-combinatorics-012", "expression", [
        (r"\left(\binom{2k}{k}\right)^2", EQ, "latex_cosmetics"),
        (r"\dbinom{2k}{k}^{2}", EQ, "latex_cosmetics"),
        (r"\binom{2k}{k}", NE, "missing_power"),
        (r"\binom{2k}{k-1}^2", NE, "off_by_one"),
    ]),
    ("imo-bench-combinatorics-015", "expression", [
        (r"61917364224", EQ, "evaluated"),
        (r"61,917,364,224", EQ, "comma_thousands"),
        (r"12^{11}", NE, "off_by_one"),
        (r"10^{12}", NE, "swapped"),
    ]),
    ("imo-bench-combinatorics-024", "fraction", [
        (r"\frac{-2024}{2025}", EQ, "sign_placement"),
        (r"-1+\frac{1}{2025}", EQ, "unevaluated"),
        (r"\frac{2024}{2025}", NE, "sign_flip"),
        (r"-\frac{2025}{2024}", NE, "inverted_fraction"),
    ]),
    ("imo-bench-combinatorics-034", "expression", [
        (r"2^a\cdot 3^b\cdot 5^c", EQ, "latex_cosmetics"),
        (r"3^b 5^c 2^a", EQ, "reordered_factors"),
        (r"2^a 3^b", NE, "missing_factor"),
        (r"2^a 3^c 5^b", NE, "swapped_variables"),
    ]),
    ("imo-bench-combinatorics-047", "fraction", [
        (r"0.09375", EQ, "decimal_form"),
        (r"\frac{6}{64}", EQ, "unreduced_fraction"),
        (r"\frac{3}{16}", NE, "similar_fraction"),
        (r"0.094", NE, "rounded_decimal"),
    ]),
    ("imo-bench-combinatorics-052", "expression", [
        (r"\frac{(2k)!}{2^k k!}", EQ, "closed_form"),
        (r"(2k-1)!!.", EQ, "trailing_period"),
        (r"(2k+1)!!", NE, "off_by_one"),
        (r"(2k-1)!", NE, "single_vs_double_factorial"),
    ]),
    ("imo-bench-combinatorics-058", "expression", [
        (r"\left\lfloor \sqrt{n-1} \right\rfloor", EQ, "latex_cosmetics"),
        (r"\lfloor\sqrt{n+1}\rfloor", NE, "sign_flip"),
        (r"\lceil\sqrt{n-1}\rceil", NE, "floor_vs_ceiling"),
    ]),
    ("imo-bench-combinatorics-064", "prose", [
        (r"no positive integers", EQ, "case_of_prose"),
        (r"\text{No positive integers.}", EQ, "latex_cosmetics"),
        (r"all positive integers", NE, "prose_opposite"),
    ]),
    ("imo-bench-combinatorics-095", "fraction", [
        (r"0.96", EQ, "decimal_form"),
        (r"96\%", EQ, "percent"),
        (r"\frac{25}{24}", NE, "inverted_fraction"),
        (r"\frac{23}{25}", NE, "similar_fraction"),
    ]),
    ("imo-bench-geometry-005", "radical", [
        (r"1+\sqrt{2}", EQ, "reordered_sum"),
        (r"\frac{1}{\sqrt2-1}", EQ, "rationalized"),
        (r"\sqrt{2}-1", NE, "sign_flip"),
        (r"2.414", NE, "rounded_decimal"),
    ]),
    ("imo-bench-geometry-007", "expression", [
        (r"\dfrac{R^2+rR}{\sqrt{R^2-2rR}}", EQ, "reordered_factors"),
        (r"\frac{R(R+r)}{\sqrt{R(R-2r)}}", EQ, "factored"),
        (r"\frac{r^2+Rr}{\sqrt{r^2-2Rr}}", NE, "case_of_symbol"),
        (r"\frac{R^2-Rr}{\sqrt{R^2-2Rr}}", NE, "sign_flip"),
    ]),
    ("imo-bench-geometry-008", "expression", [
        (r"-2r+R", EQ, "reordered_sum"),
        (r"R-2R", NE, "case_of_symbol"),
        (r"r-2R", NE, "case_of_symbol"),
        (r"R+2r", NE, "sign_flip"),
    ]),
    ("imo-bench-geometry-010", "expression", [
        (r"\frac{qp}{q+p}", EQ, "reordered_factors"),
        (r"\frac{1}{\frac{1}{p}+\frac{1}{q}}", EQ, "algebraic_rewrite"),
        (r"\frac{pq}{p-q}", NE, "sign_flip"),
        (r"\frac{p+q}{pq}", NE, "inverted_fraction"),
    ]),
    ("imo-bench-geometry-011", "radical", [
        (r"\frac{\sqrt{21}+5}{2}", EQ, "reordered_sum"),
        (r"2.5+\frac{\sqrt{21}}{2}", EQ, "expanded"),
        (r"\frac{5-\sqrt{21}}{2}", NE, "sign_flip"),
        (r"\frac{5+\sqrt{21}}{4}", NE, "similar_fraction"),
    ]),
    ("imo-bench-geometry-022", "radical", [
        (r"2^{1/2}", EQ, "power_form"),
        (r"\frac{2}{\sqrt{2}}", EQ, "rationalized"),
        (r"1.4142", NE, "rounded_decimal"),
        (r"\sqrt{3}", NE, "similar_radical"),
    ]),
    ("imo-bench-geometry-028", "expression", [
        (r"180^\circ - 2\alpha", EQ, "degrees"),
        (r"-2\alpha+180", EQ, "reordered_sum"),
        (r"180-\alpha", NE, "wrong_coefficient"),
        (r"90 - 2\alpha", NE, "constant_offset"),
    ]),
    ("imo-bench-geometry-032", "decimal", [
        (r"\frac{7}{4}", EQ, "fraction_form"),
        (r"1\frac{3}{4}", EQ, "mixed_number"),
        (r"1.57", NE, "similar_decimal"),
        (r"1.750", EQ, "trailing_zero"),
    ]),
    ("imo-bench-geometry-033", "radical", [
        (r"\frac{9}{16}\sqrt{3}", EQ, "reordered_factors"),
        (r"\frac{27}{16\sqrt{3}}", EQ, "rationalized"),
        (r"\frac{9\sqrt{2}}{16}", NE, "similar_radical"),
        (r"0.974", NE, "rounded_decimal"),
    ]),
    ("imo-bench-geometry-036", "expression", [
        (r"\frac{\sqrt{19}}{2}a", EQ, "reordered_factors"),
        (r"\frac{A\sqrt{19}}{2}", NE, "case_of_symbol"),
        (r"\frac{a\sqrt{17}}{2}", NE, "similar_radical"),
    ]),
    ("imo-bench-geometry-040", "set", [
        (r"\frac{1}{2}, 1", EQ, "fraction_form"),
        (r"\{1, 0.5\}", EQ, "reordered_set"),
        (r"\frac{1}{2}", NE, "missing_element"),
        (r"\frac{1}{2}, 1, 2", NE, "extra_element"),
    ]),
    ("imo-bench-geometry-049", "expression", [
        (r"\pi l+2\pi", EQ, "expanded"),
        (r"(l+2)\pi", EQ, "reordered_factors"),
        (r"\pi(l+1)", NE, "off_by_one"),
        (r"\pi(L+2)", NE, "case_of_symbol"),
    ]),
    ("imo-bench-geometry-056", "radical", [
        (r"\frac{\pi\sqrt{510}}{3}", EQ, "reordered_factors"),
        (r"\pi\sqrt{\frac{170}{3}}", EQ, "algebraic_rewrite"),
        (r"\frac{\sqrt{510}}{3}", NE, "missing_factor"),
        (r"23.65", NE, "rounded_decimal"),
    ]),
    ("imo-bench-geometry-075", "radical", [
        (r"\frac{\sqrt{21}}{7}", EQ, "rationalized"),
        (r"\frac{\sqrt3}{\sqrt7}", EQ, "algebraic_rewrite"),
        (r"\sqrt{\frac{7}{3}}", NE, "inverted_fraction"),
        (r"\frac{3}{7}", NE, "missing_root"),
    ]),
    ("imo-bench-geometry-076", "expression", [
        (r"\frac{4}{x\sqrt{4 - x^{2}}}", EQ, "latex_cosmetics"),
        (r"4x^{-1}(4-x^2)^{-1/2}", EQ, "power_form"),
        (r"\frac{4}{x\sqrt{4+x^2}}", NE, "sign_flip"),
        (r"\frac{4}{\sqrt{4-x^2}}", NE, "missing_factor"),
    ]),
    ("imo-bench-geometry-087", "radical", [
        (r"\frac{3\sqrt{15}}{10}", EQ, "rationalized"),
        (r"\frac{3}{2}\sqrt{\frac{3}{5}}", EQ, "algebraic_rewrite"),
        (r"\frac{3\sqrt{5}}{2\sqrt{3}}", NE, "swapped"),
        (r"1.1619", NE, "rounded_decimal"),
    ]),
    ("imo-bench-geometry-096", "fraction", [
        (r"\frac{7}{18}", EQ, "unbalanced_delimiter_in_reference"),
        (r"0.3\overline{8}", EQ, "repeating_decimal"),
        (r"0.39", NE, "rounded_decimal"),
        (r"\frac{7}{8}", NE, "similar_fraction"),
    ]),
    ("imo-bench-number_theory-004", "tuple", [
        (r"(a,b,c)=(1,2,3)", EQ, "assignment"),
        (r"\left( 1, 2, 3 \right)", EQ, "latex_cosmetics"),
        (r"(3, 2, 1)", NE, "swapped_tuple_order"),
        (r"\{1, 2, 3\}", NE, "set_vs_tuple"),
    ]),
    ("imo-bench-number_theory-005", "prose", [
        (r"\mathbb Z", EQ, "latex_cosmetics"),
        (r"\mathbb{N}", NE, "different_set"),
    ]),
    ("imo-bench-number_theory-012", "relation", [
        (r"n \geq 2", EQ, "latex_cosmetics"),
        (r"n > 1", EQ, "integer_domain"),
        (r"n \ge 3", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-013", "expression", [
        (r"1+(n-2)2^n", EQ, "reordered_sum"),
        (r"n2^n-2^{n+1}+1", EQ, "expanded"),
        (r"(n-2)2^n-1", NE, "sign_flip"),
        (r"(n-1)2^n+1", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-015", "tuple", [
        (r"(x,y,z) = (3, 2, 5)", EQ, "assignment"),
        (r"(3,5,2)", NE, "swapped_tuple_order"),
        (r"(3,2,6)", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-016", "function", [
        (r"g(x)=\lfloor x\rfloor, g(x)=\lceil x\rceil, g(x)=c", EQ, "reordered_list"),
        (r"g(x)=c, g(x)=\lfloor x \rfloor", NE, "missing_element"),
    ]),
    ("imo-bench-number_theory-019", "tuple", [
        (r"(2, 251, 252)", EQ, "latex_cosmetics"),
        (r"(2, 252, 251)", NE, "swapped_tuple_order"),
        (r"(2, 251)", NE, "missing_element"),
    ]),
    ("imo-bench-number_theory-022", "set", [
        (r"\{1, 3, 5\}", EQ, "braced_set"),
        (r"5,3,1", EQ, "reordered_set"),
        (r"1, 3", NE, "missing_element"),
        (r"1, 3, 5, 7", NE, "extra_element"),
    ]),
    ("imo-bench-number_theory-026", "expression", [
        (r"2^{n}", EQ, "latex_cosmetics"),
        (r"2^{n+1}", NE, "off_by_one"),
        (r"n^2", NE, "swapped"),
    ]),
    ("imo-bench-number_theory-031", "expression", [
        (r"5l^2-10l+5", EQ, "expanded"),
        (r"5(1-l)^2", EQ, "algebraic_rewrite"),
        (r"5(l+1)^2", NE, "sign_flip"),
        (r"5(L-1)^2", NE, "case_of_symbol"),
    ]),
    ("imo-bench-number_theory-034", "prose", [
        (r"all powers of 2", EQ, "case_of_prose"),
        (r"All powers of $2$.", EQ, "latex_cosmetics"),
        (r"all powers of 3", NE, "prose_different_number"),
    ]),
    ("imo-bench-number_theory-035", "expression", [
        (r"-1+n", EQ, "reordered_sum"),
        (r"n+1", NE, "sign_flip"),
        (r"N-1", NE, "case_of_symbol"),
    ]),
    ("imo-bench-number_theory-038", "expression", [
        (r"p^2-2p+1", EQ, "expanded"),
        (r"(1-p)^2", EQ, "algebraic_rewrite"),
        (r"(p+1)^2", NE, "sign_flip"),
        (r"p^2-1", NE, "wrong_expansion"),
    ]),
    ("imo-bench-number_theory-041", "set", [
        (r"\{2,3,4,6,8,12,24\}", EQ, "braced_set"),
        (r"24, 12, 8, 6, 4, 3, 2", EQ, "reordered_set"),
        (r"2, 3, 4, 6, 8, 12", NE, "missing_element"),
        (r"1, 2, 3, 4, 6, 8, 12, 24", NE, "extra_element"),
    ]),
    ("imo-bench-number_theory-046", "expression", [
        (r"-1+2k", EQ, "reordered_sum"),
        (r"2k+1", NE, "sign_flip"),
    ]),
    ("imo-bench-number_theory-047", "relation", [
        (r"k = 2 + 7m", EQ, "reordered_sum"),
        (r"7m+2", EQ, "right_hand_side_only"),
        (r"k=7m+3", NE, "off_by_one"),
        (r"k=2m+7", NE, "swapped"),
    ]),
    ("imo-bench-number_theory-051", "decimal", [
        (r"\frac{13}{2}", EQ, "fraction_form"),
        (r"6\tfrac{1}{2}", EQ, "mixed_number"),
        (r"6.05", NE, "similar_decimal"),
        (r"6.5.", EQ, "trailing_period"),
    ]),
    ("imo-bench-number_theory-052", "expression", [
        (r"65537", EQ, "evaluated"),
        (r"65\,537", EQ, "thin_space_thousands"),
        (r"2^{16}-1", NE, "sign_flip"),
        (r"65536", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-058", "function", [
        (r"a_{ij}=i+j-1", EQ, "latex_cosmetics"),
        (r"a_{ij} = j + i - 1", EQ, "reordered_sum"),
        (r"a_{ij}=i+j+1", NE, "sign_flip"),
        (r"a_{ij}=ij-1", NE, "wrong_operation"),
    ]),
    ("imo-bench-number_theory-060", "expression", [
        (r"\frac{1+2025+2025^2+2025^{101}}{2026}", EQ, "reordered_sum"),
        (r"\frac{2025^{101} + 2025^2 + 2025 - 1}{2026}", NE, "sign_flip"),
        (r"\frac{2025^{100} + 2025^2 + 2025 + 1}{2026}", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-062", "set", [
        (r"\{3125, 27, 4\}", EQ, "reordered_set"),
        (r"2^2, 3^3, 5^5", EQ, "unevaluated"),
        (r"4, 27", NE, "missing_element"),
        (r"4, 27, 3124", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-063", "set", [
        (r"\{0,1,2,4,12\}", EQ, "braced_set"),
        (r"12, 4, 2, 1, 0", EQ, "reordered_set"),
        (r"1, 2, 4, 12", NE, "missing_element"),
        (r"0, 1, 2, 4, 12, 24", NE, "extra_element"),
    ]),
    ("imo-bench-number_theory-066", "function", [
        (r"f(x) = x(x-1)", EQ, "factored"),
        (r"f(t)=t^2-t", EQ, "renamed_dummy_variable"),
        (r"f(x) = x^2 + x", NE, "sign_flip"),
        (r"f(x) = x^2", NE, "missing_term"),
    ]),
    ("imo-bench-number_theory-074", "tuple", [
        (r"(x, y) = (0, 0)", EQ, "assignment"),
        (r"(0, 1)", NE, "off_by_one"),
    ]),
    ("imo-bench-number_theory-075", "function", [
        (r"P(x)=-4+x", EQ, "reordered_sum"),
        (r"P(y) = y - 4", EQ, "renamed_dummy_variable"),
        (r"P(x) = x + 4", NE, "sign_flip"),
        (r"P(x) = 4 - x", NE, "sign_flip"),
    ]),
    ("imo-bench-number_theory-081", "prose", [
        (r"No solutions.", EQ, "case_of_prose"),
        (r"\text{no solutions}", EQ, "latex_cosmetics"),
        (r"none", EQ, "prose_rewording"),
        (r"infinitely many solutions", NE, "prose_opposite"),
    ]),
    ("imo-bench-number_theory-084", "set", [
        (r"-3, 5", EQ, "reordered_set"),
        (r"\{5, -3\}", EQ, "braced_set"),
        (r"5, 3", NE, "sign_flip"),
        (r"5", NE, "missing_element"),
    ]),
    ("imo-bench-number_theory-090", "expression", [
        (r"(n-2)!.", EQ, "trailing_period"),
        (r"(n-1)!", NE, "off_by_one"),
        (r"(n-2)!!", NE, "single_vs_double_factorial"),
    ]),
    ("imo-bench-number_theory-094", "set", [
        (r"\{1, 13, 25, 325\}", EQ, "braced_set"),
        (r"325, 25, 13, 1", EQ, "reordered_set"),
        (r"1, 13, 25", NE, "missing_element"),
        (r"1, 13, 26, 325", NE, "off_by_one"),
    ]),
    ("imo-bench-geometry-001", "fraction", [
        (r"1.5", EQ, "decimal_form"),
        (r"1\frac{1}{2}", EQ, "mixed_number"),
        (r"\frac{2}{3}", NE, "inverted_fraction"),
    ]),
    ("imo-bench-geometry-019", "fraction", [
        (r"1.\overline{3}", EQ, "repeating_decimal"),
        (r"1.33", NE, "rounded_decimal"),
        (r"\frac{3}{4}", NE, "inverted_fraction"),
    ]),
    ("imo-bench-geometry-086", "fraction", [
        (r"0.\overline{3}", EQ, "repeating_decimal"),
        (r"0.333", NE, "rounded_decimal"),
        (r"\frac{1}{4}", NE, "similar_fraction"),
    ]),
]

# Held-out pairs: written after the rule check was tuned on HAND, on references HAND does
# not use, and scored once without changing the check (docs/judging.md reports both).
HELDOUT = [
    ("imo-bench-algebra-012", "fraction", [(r"0.5", EQ, "decimal_form"), (r"\tfrac{2}{4}", EQ, "unreduced_fraction"), (r"\frac{1}{3}", NE, "similar_fraction")]),
    ("imo-bench-algebra-013", "function", [(r"Q(x)=2x-2, Q(x)=-2", EQ, "reordered_list"), (r"Q(t)=2t-2, Q(t)=-2", EQ, "renamed_dummy_variable"), (r"Q(x)=2x-2", NE, "missing_element"), (r"Q(x)=-2, Q(x)=2x+2", NE, "sign_flip")]),
    ("imo-bench-algebra-024", "set", [(r"1, 2, \dots, 1235", EQ, "latex_cosmetics"), (r"1, 2, \ldots, 1234", NE, "off_by_one")]),
    ("imo-bench-algebra-058", "fraction", [(r"5.\overline{3}", EQ, "repeating_decimal"), (r"5\frac{1}{3}", EQ, "mixed_number"), (r"5.33", NE, "rounded_decimal"), (r"\frac{3}{16}", NE, "inverted_fraction")]),
    ("imo-bench-algebra-070", "fraction", [(r"0.25", EQ, "decimal_form"), (r"25\%", EQ, "percent"), (r"\frac{1}{2}", NE, "similar_fraction")]),
    ("imo-bench-algebra-071", "fraction", [(r"0.\overline{6}", EQ, "repeating_decimal"), (r"0.67", NE, "rounded_decimal"), (r"\frac{3}{2}", NE, "inverted_fraction")]),
    ("imo-bench-algebra-077", "fraction", [(r"-3.375", EQ, "decimal_form"), (r"-\left(\frac{3}{2}\right)^3", EQ, "unevaluated"), (r"\frac{27}{8}", NE, "sign_flip")]),
    ("imo-bench-algebra-087", "relation", [(r"n=3k, n=2k", EQ, "reordered_list"), (r"n=2k", NE, "missing_element")]),
    ("imo-bench-algebra-069", "prose", [(r"all even $n$", EQ, "prose_rewording"), (r"odd $n$", NE, "prose_opposite")]),
    ("imo-bench-geometry-006", "expression", [(r"6 \rho", EQ, "latex_cosmetics"), (r"\rho \cdot 6", EQ, "reordered_factors"), (r"3\rho", NE, "wrong_coefficient")]),
    ("imo-bench-geometry-023", "expression", [(r"h^2 r_1 r_2", EQ, "reordered_factors"), (r"r_1 r_2 h", NE, "missing_power")]),
    ("imo-bench-geometry-027", "expression", [(r"y+2x", EQ, "reordered_sum"), (r"2y+x", NE, "swapped"), (r"2X+Y", NE, "case_of_symbol")]),
    ("imo-bench-geometry-034", "expression", [(r"\frac{50A}{39}", EQ, "reordered_factors"), (r"\frac{39}{50}A", NE, "inverted_fraction")]),
    ("imo-bench-geometry-035", "fraction", [(r"3.5", EQ, "decimal_form"), (r"3\tfrac12", EQ, "mixed_number"), (r"\frac{2}{7}", NE, "inverted_fraction")]),
    ("imo-bench-geometry-039", "expression", [(r"\frac{\sqrt{y}}{\sqrt{z}}", EQ, "algebraic_rewrite"), (r"\sqrt{\frac{z}{y}}", NE, "inverted_fraction")]),
    ("imo-bench-geometry-043", "expression", [(r"\frac{3(XZ-XY)}{2}", EQ, "algebraic_rewrite"), (r"1.5XZ-1.5XY", EQ, "expanded"), (r"\frac{3}{2}(XY-XZ)", NE, "sign_flip")]),
    ("imo-bench-geometry-046", "expression", [(r"0.5a", EQ, "decimal_form"), (r"\frac{A}{2}", NE, "case_of_symbol"), (r"2a", NE, "inverted_fraction")]),
    ("imo-bench-geometry-073", "expression", [(r"\rho/R", EQ, "slash_fraction"), (r"\frac{R}{\rho}", NE, "inverted_fraction")]),
    ("imo-bench-geometry-082", "radical", [(r"\sqrt{\frac{5}{2}}", EQ, "algebraic_rewrite"), (r"\frac{5}{\sqrt{10}}", EQ, "rationalized"), (r"1.58", NE, "rounded_decimal"), (r"\frac{\sqrt{10}}{3}", NE, "similar_fraction")]),
    ("imo-bench-geometry-089", "radical", [(r"\frac{96}{13}\sqrt{10}", EQ, "reordered_factors"), (r"\frac{96\sqrt{10}}{31}", NE, "similar_fraction")]),
    ("imo-bench-geometry-091", "fraction", [(r"0.91\overline{6}", EQ, "repeating_decimal"), (r"0.9167", NE, "rounded_decimal"), (r"\frac{12}{11}", NE, "inverted_fraction")]),
    ("imo-bench-geometry-097", "fraction", [(r"3\frac{3}{14}", EQ, "mixed_number"), (r"\frac{90}{28}", EQ, "unreduced_fraction"), (r"\frac{45}{41}", NE, "similar_fraction")]),
    ("imo-bench-number_theory-010", "expression", [(r"p \cdot 7^d", EQ, "reordered_factors"), (r"7^{d+1}p", NE, "off_by_one"), (r"7^D p", NE, "case_of_symbol")]),
    ("imo-bench-number_theory-030", "expression", [(r"3 n", EQ, "latex_cosmetics"), (r"n+n+n", EQ, "unevaluated"), (r"3n+1", NE, "off_by_one")]),
    ("imo-bench-number_theory-042", "set", [(r"\{10, 4, 1\}", EQ, "reordered_set"), (r"1, 4, 10, 20", NE, "extra_element")]),
    ("imo-bench-number_theory-050", "set", [(r"2, 1", EQ, "reordered_set"), (r"1", NE, "missing_element"), (r"n=1, n=2", EQ, "assignment")]),
    ("imo-bench-number_theory-059", "set", [(r"\{8,9\}", EQ, "braced_set"), (r"8, 10", NE, "off_by_one")]),
    ("imo-bench-number_theory-065", "set", [(r"5, 2", EQ, "reordered_set"), (r"2, 5, 7", NE, "extra_element")]),
    ("imo-bench-number_theory-068", "set", [(r"p=3, p=7", EQ, "assignment"), (r"3, 5, 7", NE, "extra_element")]),
    ("imo-bench-number_theory-072", "tuple", [(r"(a, b, c) = (5, 3, 7)", EQ, "assignment"), (r"(3, 5, 7)", NE, "swapped_tuple_order"), (r"(5, 3, 7).", EQ, "trailing_period")]),
    ("imo-bench-number_theory-073", "expression", [(r"-1+q", EQ, "reordered_sum"), (r"q+1", NE, "sign_flip"), (r"Q-1", NE, "case_of_symbol")]),
    ("imo-bench-number_theory-078", "set", [(r"6, 2, 0", EQ, "reordered_set"), (r"0, 2, 4, 6", NE, "extra_element")]),
    ("imo-bench-number_theory-080", "expression", [(r"\left\lfloor \frac{p}{9}\right\rfloor", EQ, "latex_cosmetics"), (r"\lfloor p/9 \rfloor", EQ, "slash_fraction"), (r"\lceil \frac{p}{9} \rceil", NE, "floor_vs_ceiling")]),
    ("imo-bench-number_theory-083", "set", [(r"2021, 47, 43", EQ, "reordered_set"), (r"2\,021, 43, 47", EQ, "thin_space_thousands"), (r"43, 47", NE, "missing_element")]),
    ("imo-bench-algebra-039", "integer", [(r"2.", EQ, "trailing_period"), (r"k = 2", EQ, "assignment"), (r"-2", NE, "sign_flip")]),
    ("imo-bench-geometry-017", "decimal", [(r"\dfrac{1}{2}", EQ, "fraction_form"), (r"50\%", EQ, "percent"), (r"0.55", NE, "similar_decimal")]),
    ("imo-bench-combinatorics-098", "expression", [(r"(\lambda+1)^{8} + \lambda(\lambda^{7}+28\lambda^{6}+182\lambda^{5}+406\lambda^{4}+425\lambda^{3}+230\lambda^{2}+63\lambda+7)", NE, "wrong_expansion"), (r"1 + 15\lambda + 91\lambda^2 + 286\lambda^3 + 495\lambda^4 + 462\lambda^5 + 210\lambda^6 + 36\lambda^7 + \lambda^8", EQ, "reordered_sum")]),
]

# Integer references and the rules applied to each (cycled for variety). Equivalent forms:
# separators, delimiters, wrappers, assignment, a trailing period. Look-alikes: ±1, sign,
# a power of ten, a doubled digit.
INT_IDS = [
    "imo-bench-algebra-001", "imo-bench-algebra-007", "imo-bench-algebra-015",
    "imo-bench-algebra-019", "imo-bench-algebra-030", "imo-bench-algebra-062",
    "imo-bench-algebra-080", "imo-bench-algebra-093", "imo-bench-combinatorics-002",
    "imo-bench-combinatorics-017", "imo-bench-combinatorics-019", "imo-bench-combinatorics-023",
    "imo-bench-combinatorics-026", "imo-bench-combinatorics-037", "imo-bench-combinatorics-041",
    "imo-bench-combinatorics-050", "imo-bench-combinatorics-057", "imo-bench-combinatorics-072",
    "imo-bench-combinatorics-090", "imo-bench-geometry-020", "imo-bench-geometry-060",
    "imo-bench-geometry-084", "imo-bench-number_theory-021", "imo-bench-number_theory-056",
    "imo-bench-number_theory-095", "imo-bench-combinatorics-067", "imo-bench-combinatorics-076",
]


def thin(n, sep):
    s = f"{n:,}"
    return s.replace(",", sep)


def integer_pairs(value, i):
    n = int(value)
    eq = []
    if abs(n) >= 1000:
        eq += [(thin(n, r"\,"), "thin_space_thousands"), (thin(n, "{,}"), "braced_comma_thousands"),
               (thin(n, ","), "comma_thousands"), (thin(n, "\\ "), "space_thousands")]
    eq += [(f"${n}$", "math_delimiters"), (rf"\text{{{n}}}", "text_wrapper"), (f"{n}.", "trailing_period"),
           (f"n = {n}", "assignment"), (rf"\mathbf{{{n}}}", "text_wrapper")]
    ne = [(str(n + 1), "off_by_one"), (str(n - 1), "off_by_one"), (str(-n), "sign_flip"),
          (str(n * 10), "power_of_ten")]
    if abs(n) >= 1000:
        ne.append((thin(n + 1000, r"\,"), "thin_space_thousands_off"))
    out = [eq[i % len(eq)], eq[(i + 2) % len(eq)]]
    out = [(c, EQ, k) for c, k in out] + [(c, NE, k) for c, k in (ne[i % len(ne)], ne[(i + 1) % len(ne)])]
    return out


def main():
    path = sys.argv[1]
    with open(path, newline="", encoding="utf-8") as f:
        rows = {r["Problem ID"]: r["Short Answer"].strip() for r in csv.DictReader(f)}
    out = []
    if len(sys.argv) > 2 and sys.argv[2] == "--heldout":
        emit(rows, HELDOUT, out)
        return
    for pid, typ, cands in HAND:
        ref = rows[pid]
        for cand, label, kind in cands:
            out.append({"problem_id": pid, "reference": ref, "candidate": cand,
                        "equivalent": label, "answer_type": typ, "kind": kind})
    for i, pid in enumerate(INT_IDS):
        ref = rows[pid]
        assert ref.lstrip("-").isdigit(), (pid, ref)
        for cand, label, kind in integer_pairs(ref, i):
            out.append({"problem_id": pid, "reference": ref, "candidate": cand,
                        "equivalent": label, "answer_type": "integer", "kind": kind})
    emit(rows, [], out)


def emit(rows, groups, out):
    for pid, typ, cands in groups:
        ref = rows[pid]
        for cand, label, kind in cands:
            out.append({"problem_id": pid, "reference": ref, "candidate": cand,
                        "equivalent": label, "answer_type": typ, "kind": kind})
    seen = set()
    for row in out:
        key = (row["reference"], row["candidate"])
        assert key not in seen, key
        seen.add(key)
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
