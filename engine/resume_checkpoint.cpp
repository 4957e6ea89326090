#include "engine/resume_checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/framed_file.h"
#include "io/model_file.h"
#include "io/schema/checkpoint_generated.h"

namespace fgm {
namespace {

constexpr char kMagic[8] = {'F', 'G', 'M', 'C', 'K', 'P', 'T', '1'};

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<schema::OuterIteration>>> encode_iterations(
    flatbuffers::FlatBufferBuilder& fb, const std::vector<IterationRecord>& iterations) {
  std::vector<flatbuffers::Offset<schema::OuterIteration>> its;
  for (const auto& r : iterations) {
    auto apg_stop = fb.CreateString(r.apg_stop);
    its.push_back(schema::CreateOuterIteration(
        fb, r.iter, r.selected, r.added, r.objective, r.rel_decrease, r.sip_violation, r.score_seconds,
        r.solve_seconds, r.bytes_streamed, r.peak_rss_bytes, r.candidates_scored, r.pair_updates,
        r.apg_iterations, r.apg_line_search_steps, r.apg_gradient_evaluations, r.apg_converged, apg_stop,
        r.apg_relative_gap, r.apg_certified));
  }
  return fb.CreateVector(its);
}

std::vector<IterationRecord> decode_iterations(
    const flatbuffers::Vector<flatbuffers::Offset<schema::OuterIteration>>* iterations) {
  std::vector<IterationRecord> out;
  if (!iterations) return out;
  for (const auto* r : *iterations) {
    IterationRecord rec;
    rec.iter = r->iter();
    rec.selected = r->selected();
    rec.added = r->added();
    rec.objective = r->objective();
    rec.rel_decrease = r->rel_decrease();
    rec.sip_violation = r->sip_violation();
    rec.score_seconds = r->score_seconds();
    rec.solve_seconds = r->solve_seconds();
    rec.bytes_streamed = r->bytes_streamed();
    rec.peak_rss_bytes = r->peak_rss_bytes();
    rec.candidates_scored = r->candidates_scored();
    rec.pair_updates = r->pair_updates();
    rec.apg_iterations = r->apg_iterations();
    rec.apg_line_search_steps = r->apg_line_search_steps();
    rec.apg_gradient_evaluations = r->apg_gradient_evaluations();
    rec.apg_converged = r->apg_converged();
    rec.apg_stop = r->apg_stop() ? r->apg_stop()->str() : "";
    rec.apg_relative_gap = r->apg_relative_gap();
    rec.apg_certified = r->apg_certified();
    out.push_back(rec);
  }
  return out;
}

flatbuffers::Offset<schema::TrainState> encode_train(flatbuffers::FlatBufferBuilder& fb,
                                                     const TrainProgress& t) {
  std::vector<flatbuffers::Offset<schema::SelectedBatch>> batches;
  for (const auto& b : t.batches) batches.push_back(schema::CreateSelectedBatch(fb, fb.CreateVector(b)));
  auto its = encode_iterations(fb, t.iterations);
  return schema::CreateTrainState(fb, fb.CreateVector(batches), fb.CreateVector(t.apg.w), t.apg.b,
                                  t.apg.lipschitz, /*alpha=*/0, its,
                                  fb.CreateString(t.stop_reason), t.next_path_point,
                                  t.last_path_point_features, t.total_apg_iterations,
                                  t.total_line_search_steps, t.total_gradient_evaluations,
                                  t.total_bytes_streamed);
}

TrainProgress decode_train(const schema::TrainState& s) {
  TrainProgress t;
  if (s.batches())
    for (const auto* b : *s.batches())
      t.batches.push_back(copy_scalars(b->candidates()));
  t.apg.w = copy_scalars(s.weights());
  t.apg.b = s.bias();
  t.apg.lipschitz = s.lipschitz();
  t.iterations = decode_iterations(s.iterations());
  t.stop_reason = s.stop_reason() ? s.stop_reason()->str() : "";
  t.next_path_point = s.next_path_point();
  t.last_path_point_features = s.last_path_point_features();
  t.total_apg_iterations = s.total_apg_iterations();
  t.total_line_search_steps = s.total_line_search_steps();
  t.total_gradient_evaluations = s.total_gradient_evaluations();
  t.total_bytes_streamed = s.total_bytes_streamed();
  return t;
}

// An embedded model file, copied out first: decode_model reads 8-byte fields
// and a [ubyte] vector is only 4-byte aligned.
Model decode_embedded_model(const flatbuffers::Vector<uint8_t>& bytes, const std::string& file) {
  std::string copy(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  try {
    return decode_model(copy, file);
  } catch (const Error&) {
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "a path point's model is damaged"));
  }
}

}  // namespace

bool key_affects_result(const std::string& key) {
  static const char* const kNeutral[] = {
      "engine.threads", "engine.blocks_in_flight", "engine.memory_budget", "engine.progress",
      "engine.cache_dir", "output.dir", "output.report", "data.train", "data.test", "data.validation", "data.truth"};
  for (const char* k : kNeutral)
    if (key == k) return false;
  return true;
}

std::map<std::string, std::string> result_config(const std::map<std::string, std::string>& dump) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : dump)
    if (key_affects_result(k)) out[k] = v;
  return out;
}

std::vector<std::string> identity_differences(const RunIdentity& saved, const RunIdentity& current) {
  std::vector<std::string> diffs;
  if (saved.command != current.command)
    diffs.push_back(fmt::format("written by `fgm {}`, this is `fgm {}`", saved.command, current.command));
  if (saved.engine_version != current.engine_version)
    diffs.push_back(fmt::format("engine version: checkpoint {}, now {}", saved.engine_version,
                                current.engine_version));
  if (saved.store_checksum != current.store_checksum)
    diffs.push_back(fmt::format("training store checksum: checkpoint {}, now {}", hex64(saved.store_checksum),
                                hex64(current.store_checksum)));
  auto value_of = [](const std::map<std::string, std::string>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? std::string("(unset)") : it->second;
  };
  std::map<std::string, bool> keys;
  for (const auto& kv : saved.config) keys[kv.first] = true;
  for (const auto& kv : current.config) keys[kv.first] = true;
  for (const auto& [k, unused] : keys) {
    std::string a = value_of(saved.config, k), b = value_of(current.config, k);
    if (a != b) diffs.push_back(fmt::format("{}: checkpoint {}, now {}", k, a, b));
  }
  return diffs;
}

std::string rank_checkpoint_file(const std::string& out_dir, int rank, uint64_t step) {
  return out_dir + "/" + fmt::format("{}{}.step-{}.fgm", kRankCheckpointPrefix, rank, step);
}

void write_checkpoint(const std::string& file, const RunIdentity& identity, const TrainProgress* train,
                      const PathProgress* path, MemoryBudget& budget, const SolverState* solver) {
  // The builder and the framed copy each hold the weights and the logs.
  uint64_t estimate = 4096;
  if (train) estimate += 8 * train->apg.w.size() + 128 * train->iterations.size();
  if (train)
    for (const auto& b : train->batches) estimate += 8 * b.size() + 16;
  if (path) {
    for (const auto& p : path->points)
      estimate += 64 * (p.model.features.size() + p.debiased.features.size()) + 4096;
    for (const auto& r : path->runs) estimate += 128 * r.iterations.size() + 64;
  }
  if (solver) estimate += solver->bytes.size() + solver->solver.size() + 64;
  Reservation mem = budget.reserve(2 * estimate, "resume checkpoint encoding",
                                   "use fewer training rows");

  flatbuffers::FlatBufferBuilder fb(estimate);
  // Scalars equal to their default are otherwise left out, and -0.0 == 0.0
  // would come back as +0.0: a resumed run must see the very same bits.
  fb.ForceDefaults(true);
  std::vector<flatbuffers::Offset<schema::ConfigEntry>> config;
  for (const auto& [k, v] : identity.config)
    config.push_back(schema::CreateConfigEntry(fb, fb.CreateString(k), fb.CreateString(v)));
  flatbuffers::Offset<schema::TrainState> train_state;
  if (train) train_state = encode_train(fb, *train);
  std::vector<flatbuffers::Offset<schema::PathPointState>> points;
  if (path) {
    for (const auto& p : path->points) {
      std::string model = encode_model(p.model);
      std::string debiased = p.has_debiased ? encode_model(p.debiased) : std::string();
      points.push_back(schema::CreatePathPointState(
          fb, p.point, p.B, p.C, p.train_objective, p.seconds, p.apg_iterations, p.gradient_evaluations,
          fb.CreateVector(reinterpret_cast<const uint8_t*>(model.data()), model.size()),
          fb.CreateVector(reinterpret_cast<const uint8_t*>(debiased.data()), debiased.size())));
    }
  }
  std::vector<flatbuffers::Offset<schema::PathRunState>> runs;
  if (path)
    for (const auto& r : path->runs)
      runs.push_back(schema::CreatePathRunState(fb, r.B, r.C, fb.CreateString(r.stop_reason),
                                                encode_iterations(fb, r.iterations)));
  flatbuffers::Offset<flatbuffers::String> solver_name;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> solver_state;
  if (solver) {
    solver_name = fb.CreateString(solver->solver);
    solver_state = fb.CreateVector(reinterpret_cast<const uint8_t*>(solver->bytes.data()), solver->bytes.size());
  }
  auto root = schema::CreateCheckpoint(
      fb, kCheckpointFormatVersion, fb.CreateString(identity.command),
      fb.CreateString(identity.engine_version), fb.CreateVector(config), identity.store_checksum,
      train_state, fb.CreateVector(points), path ? path->run : 0, path ? path->total_apg_iterations : 0,
      path ? path->total_gradient_evaluations : 0, fb.CreateVector(runs), solver_name, solver_state,
      solver ? solver->rank_files_step : 0);
  schema::FinishCheckpointBuffer(fb, root);

  write_file_atomic(file, frame_flatbuffer(kMagic, fb.GetBufferPointer(), fb.GetSize()));
}

ResumeCheckpoint read_checkpoint(const std::string& file, MemoryBudget& budget) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0)
    throw Error(ErrorKind::kIo, msg::cannot_open(file, std::strerror(errno)));
  // A FIFO or device planted at the name would block the read (or never end).
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "not a regular file"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Check the header before reading (or reserving for) the rest.
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(file, std::strerror(errno)));
  char head[kFramePreambleBytes];
  if (size < kFramePreambleBytes || !in.read(head, kFramePreambleBytes) || std::memcmp(head, kMagic, 8) != 0)
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "no fgm checkpoint header"));
  uint64_t len, sum;
  std::memcpy(&len, head + 8, 8);
  std::memcpy(&sum, head + 16, 8);
  if (len != size - kFramePreambleBytes)
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(file, fmt::format("{} bytes, the header says {}", size, len + kFramePreambleBytes)));
  Reservation mem = budget.reserve(len, "resume checkpoint", "use fewer training rows");
  // uint64_t storage keeps the FlatBuffer 8-byte aligned.
  std::vector<uint64_t> storage((len + 7) / 8);
  auto* buf = reinterpret_cast<uint8_t*>(storage.data());
  if (!in.read(reinterpret_cast<char*>(buf), static_cast<std::streamsize>(len)))
    throw Error(ErrorKind::kIo, msg::read_failed(file, std::strerror(errno)));
  if (xxh64(buf, len) != sum)
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "checksum mismatch"));
  flatbuffers::Verifier verifier(buf, len);
  if (!schema::VerifyCheckpointBuffer(verifier))
    throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "invalid FlatBuffer"));
  const schema::Checkpoint* c = schema::GetCheckpoint(buf);
  if (c->format_version() != kCheckpointFormatVersion)
    throw Error(ErrorKind::kCorruption,
                msg::not_a_checkpoint(file, fmt::format("format version {}, this fgm reads {}",
                                                        c->format_version(), kCheckpointFormatVersion)));
  auto str = [](const flatbuffers::String* s) { return s ? s->str() : std::string(); };
  ResumeCheckpoint out;
  out.identity.command = str(c->command());
  out.identity.engine_version = str(c->engine_version());
  out.identity.store_checksum = c->store_checksum();
  if (c->config())
    for (const auto* kv : *c->config()) out.identity.config[str(kv->key())] = str(kv->value());
  if (c->train()) out.train = decode_train(*c->train());
  if (c->path_points()) {
    for (const auto* p : *c->path_points()) {
      PathPoint point;
      point.point = p->point();
      point.B = p->b_value();
      point.C = p->c_value();
      point.train_objective = p->train_objective();
      point.seconds = p->seconds();
      point.apg_iterations = p->apg_iterations();
      point.gradient_evaluations = p->gradient_evaluations();
      if (!p->model() || p->model()->size() == 0)
        throw Error(ErrorKind::kCorruption, msg::not_a_checkpoint(file, "a path point has no model"));
      point.model = decode_embedded_model(*p->model(), file);
      if (p->debiased() && p->debiased()->size() > 0) {
        point.debiased = decode_embedded_model(*p->debiased(), file);
        point.has_debiased = true;
      }
      out.path.points.push_back(std::move(point));
    }
  }
  out.path.run = c->path_run();
  out.path.total_apg_iterations = c->path_total_apg_iterations();
  out.path.total_gradient_evaluations = c->path_total_gradient_evaluations();
  if (c->solver_name() && !c->solver_name()->str().empty()) {
    SolverState state;
    state.solver = c->solver_name()->str();
    if (c->solver_state()) state.bytes.assign(reinterpret_cast<const char*>(c->solver_state()->data()), c->solver_state()->size());
    state.rank_files_step = c->rank_files_step();
    out.solver = std::move(state);
  }
  if (c->path_runs())
    for (const auto* r : *c->path_runs())
      out.path.runs.push_back({r->b_value(), r->c_value(), str(r->stop_reason()), decode_iterations(r->iterations())});
  return out;
}

}  // namespace fgm
