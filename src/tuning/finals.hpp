// The finals of a tuning search. The first pass times each configuration once, one after the
// other; a GPU that comes to a row cool and heats to its power limit during the search gives the
// first ones a higher clock (on the H200, 2026-12-07: the first trial of a row ran 12-14 % faster
// than the same kernel a second later). The fastest few of the first pass are therefore timed
// again in alternation, forward then backward (ABC CBA), so that a drifting clock weighs on each
// alike; the finals decide.
#pragma once

#include <cstddef>
#include <vector>

namespace ffpa {

// How many configurations reach the finals, and how many rounds they run.
constexpr size_t kFinalists = 3;
constexpr int kFinalRounds = 2;

// The finalists: indices into `first_ms` of at most `count` configurations, fastest first; a time
// of 0 or less means the configuration was not timed and never qualifies. Ties keep index order.
std::vector<size_t> finalists(const std::vector<double>& first_ms, size_t count);

// The order in which `entrants` finalists are timed over `rounds` rounds: 0..n-1, then n-1..0,
// alternating. Empty when fewer than two entrants (no final is needed).
std::vector<size_t> final_order(size_t entrants, int rounds);

// The winner of the finals: the entrant with the smallest mean of its round times (`rounds_ms[i]`
// holds entrant i's times, in round order; empty: it failed in the finals and loses); ties go to
// the earlier entrant (the faster in the first pass). `rounds_ms` must not be empty.
size_t final_winner(const std::vector<std::vector<double>>& rounds_ms);

}  // namespace ffpa
