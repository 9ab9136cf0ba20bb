// CheckerSession: graphs checked as their exec graphs are destroyed (issue 18). The
// injection library's exit check runs from a C atexit handler, after PyTorch has destroyed
// its graphs and their records are gone; each is therefore checked as it is destroyed, in
// the state of that moment, and the exit report holds those results.
#include <graphcheck/config.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "cupti/checker_session.h"

namespace graphcheck::cupti {
namespace {

void add_summary(Summary& into, const Summary& from) {
  into.graphs += from.graphs;
  into.nodes += from.nodes;
  into.references += from.references;
  for (std::size_t k = 0; k < into.counts.size(); ++k) {
    into.counts[k] += from.counts[k];
  }
}

}  // namespace

Status CheckerSession::check_destroyed(const std::shared_ptr<const GraphRecord>& graph,
                                       const std::vector<std::string>& warnings,
                                       std::uint64_t exec) noexcept {
  if (!options_.check_at_destroy || !graph) {
    return {};
  }
  try {
    const Gathered gathered = gather(false);
    const Lock lock(*this);
    GraphRecord labelled = with_epoch_locked(*graph);
    const auto capture = std::find_if(epochs_.begin(), epochs_.end(), [&](const Epoch& epoch) {
      return epoch.label == labelled.epoch;
    });
    const std::string label = unique_label_locked("destroy");
    graphcheck::CheckSession session;
    session.set_producer({"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING});
    session.set_allow(options_.allow);
    if (capture != epochs_.end()) {
      session.put_epoch(*capture);
    } else {
      labelled.epoch = label;  // never noted at capture: judged in this state alone
    }
    session.put_epoch(current_epoch_locked(label, gathered));
    const std::uint64_t id = labelled.id;
    session.put_graph(std::move(labelled));
    graphcheck::CheckOptions check_options;
    check_options.epoch = label;
    std::shared_ptr<const Report> report = with_warnings(session.check(check_options), warnings);
    destroyed_.push_back(DestroyedCheck{id, exec, label, report});
    if (report->has_findings()) {
      log("graphcheck: findings in graph " + std::to_string(id) + " (exec " + format_address(exec) +
          "), checked as it was destroyed\n" + to_text(*report));
      emit_locked(session.snapshot(), *report, "destroy");
    }
    return {};
  } catch (const std::exception& error) {
    return Status::error(std::string("graphcheck: the check of a destroyed graph failed: ") +
                         error.what());
  } catch (...) {
    return Status::error("graphcheck: the check of a destroyed graph failed");
  }
}

std::vector<DestroyedCheck> CheckerSession::destroyed_checks() const {
  const Lock lock(*this);
  return destroyed_;
}

std::shared_ptr<const Report> CheckerSession::with_destroyed_locked(
    std::shared_ptr<const Report> report) const {
  if (destroyed_.empty()) {
    if (report->summary.graphs != 0) {
      return report;
    }
    auto copy = std::make_shared<Report>(*report);
    copy->warnings.emplace_back(kNothingChecked);
    return copy;
  }
  auto copy = std::make_shared<Report>(*report);
  std::string ids;
  std::uint64_t findings = 0;
  for (const DestroyedCheck& check : destroyed_) {
    const Report& earlier = *check.report;
    add_summary(copy->summary, earlier.summary);
    copy->findings.insert(copy->findings.end(), earlier.findings.begin(), earlier.findings.end());
    findings += earlier.findings.size();
    // A glob is stale only when it allowed nothing in any of the checks.
    std::erase_if(copy->stale_allow, [&](const std::string& glob) {
      return std::find(earlier.stale_allow.begin(), earlier.stale_allow.end(), glob) ==
             earlier.stale_allow.end();
    });
    for (const std::string& line : earlier.warnings) {
      if (std::find(copy->warnings.begin(), copy->warnings.end(), line) == copy->warnings.end()) {
        copy->warnings.push_back(line);
      }
    }
    ids += (ids.empty() ? "" : ", ") + std::to_string(check.graph);
  }
  const std::size_t count = destroyed_.size();
  copy->warnings.push_back(
      "note: " + std::to_string(count) + (count == 1 ? " graph was" : " graphs were") +
      " checked as " + (count == 1 ? "its exec graph was" : "their exec graphs were") +
      " destroyed, each in the state of that moment (epoch 'destroy'), and " +
      (count == 1 ? "is" : "are") + " counted above with their " + std::to_string(findings) +
      " finding" + (findings == 1 ? "" : "s") + ": graph" + (count == 1 ? " " : "s ") + ids);
  return copy;
}

}  // namespace graphcheck::cupti
