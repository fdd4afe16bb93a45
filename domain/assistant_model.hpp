// The naive Bayes intent model's tables: generated at build time (intent_model.cpp in the build
// tree) by domain/ai/train_intents.cpp from domain/ai/intents_train.tsv, read by
// domain/assistant_intent.cpp. The scoring lives here so that the trainer's reported accuracy
// is computed exactly as the runtime classifies.
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain::ai::model {

extern const std::size_t class_count;
extern const std::string_view class_names[]; // intent names as the training file spells them
extern const double log_prior[];             // [class]
extern const std::size_t vocabulary_size;
extern const std::string_view vocabulary[]; // sorted, terms() of the training texts
extern const double log_likelihood[];       // [term * class_count + class], Laplace-smoothed
extern const std::size_t training_size;
extern const double training_accuracy;

struct best_class {
  std::size_t index = 0;
  double posterior = 0;
  std::size_t known_terms = 0; // terms of the message the model has seen
};

// Multinomial naive Bayes: the class maximising log prior + Σ log P(term | class) over the
// message's terms (repeats count; unknown terms are skipped). Ties go to the lower class index.
// `weights(term)` returns the term's class_count log-likelihoods, or nullptr.
template <class Weights>
best_class score_terms(const std::vector<std::string>& terms, std::size_t classes,
                       const double* priors, Weights&& weights) {
  std::vector<double> s(priors, priors + classes);
  best_class out;
  for (const std::string& t : terms) {
    if (const double* w = weights(std::string_view(t))) {
      ++out.known_terms;
      for (std::size_t c = 0; c < classes; ++c) s[c] += w[c];
    }
  }
  for (std::size_t c = 1; c < classes; ++c)
    if (s[c] > s[out.index]) out.index = c;
  double sum = 0;
  for (std::size_t c = 0; c < classes; ++c) sum += std::exp(s[c] - s[out.index]);
  out.posterior = 1.0 / sum;
  return out;
}

} // namespace crm::domain::ai::model
