// fgm._fgm: the Python package's bridge to the C++ engine (python/fgm/, docs/python.md).
// It adds no training code of its own: a fit runs the CLI's own commands in
// this process (run_command, cli/cli.h) on data the package writes as LIBSVM
// text, so the engine sees exactly what `fgm train` sees; prediction uses the
// CLI's ModelScorer on the caller's CSR arrays. Log lines go to a Python
// callable (Python's logging), stdout is captured, engine errors become
// Python exceptions of the matching type, and the GIL is released while the
// engine works.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ios>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "cli/cli.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/feature_key.h"
#include "core/interrupt.h"
#include "features/model_scorer.h"
#include "io/libsvm_reader.h"
#include "io/model_file.h"

namespace py = pybind11;

namespace {

// ---- log lines -> a Python callable (level, message), Python's logging levels

py::object& log_callback() {
  static py::object* callback = new py::object();  // never destroyed: outlives interpreter shutdown order
  return *callback;
}

int python_level(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return 5;
    case spdlog::level::debug: return 10;
    case spdlog::level::info: return 20;
    case spdlog::level::warn: return 30;
    case spdlog::level::err: return 40;
    case spdlog::level::critical: return 50;
    default: return 20;
  }
}

class PythonSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!Py_IsInitialized()) return;
    const std::string text(msg.payload.data(), msg.payload.size());
    py::gil_scoped_acquire gil;
    if (!log_callback() || log_callback().is_none()) return;
    try {
      log_callback()(python_level(msg.level), text);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("fgm log callback");
    }
  }
  void flush_() override {}
};

// ---- one command at a time, stdout captured into a file

std::mutex& run_mutex() {
  static std::mutex m;
  return m;
}

// Redirects file descriptor 1 into `path` while alive (the CLI prints its
// summary line with fmt::print; a Python caller wants it back, not on stdout).
class StdoutCapture {
 public:
  explicit StdoutCapture(const std::string& path) {
    std::fflush(stdout);
    file_ = std::fopen(path.c_str(), "w+b");
    if (!file_) throw fgm::Error(fgm::ErrorKind::kIo, fmt::format("cannot create {}", path));
    saved_ = ::dup(1);
    ::dup2(::fileno(file_), 1);
  }
  ~StdoutCapture() { restore(); if (file_) std::fclose(file_); }
  std::string finish() {
    restore();
    std::string text;
    std::rewind(file_);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, file_)) > 0) text.append(buffer, n);
    return text;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

// Runs `fgm <args>` on a worker thread while this (the caller's) thread waits
// with the GIL released, looking for Ctrl-C every 100 ms: a KeyboardInterrupt
// asks the engine to stop at its next safe point (core/interrupt.h) and is
// raised once the command has unwound. Returns (exit code, what it printed on stdout).
std::pair<int, std::string> run(const std::vector<std::string>& args, const std::string& stdout_path) {
  std::promise<std::pair<int, std::string>> done;
  std::future<std::pair<int, std::string>> result = done.get_future();
  {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(run_mutex());
    fgm::clear_interrupt();
    std::thread worker([&]() {
      try {
        StdoutCapture capture(stdout_path);
        const int code = fgm::run_command(args);
        done.set_value({code, capture.finish()});
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
    bool interrupted = false;
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      if (interrupted) continue;
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        interrupted = true;  // the KeyboardInterrupt stays set: raised below, after the worker has unwound
        fgm::request_interrupt();
      }
    }
    worker.join();
    fgm::clear_interrupt();
    if (interrupted) {
      lock.unlock();
      py::gil_scoped_acquire gil;
      throw py::error_already_set();
    }
  }
  return result.get();  // rethrows the command's exception, translated below
}

// ---- CSR arrays -> LIBSVM text (what `fgm train` reads)

// Shortest text that parses back to the same double (the reader parses a
// double, then stores it as float: the same float as casting the input).
void append_number(std::string& out, double v) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  out.append(buffer, end);
}

template <typename Ptr, typename Index, typename Value>
void write_rows(std::ofstream& file, const Ptr* indptr, const Index* indices, const Value* data,
                const double* labels, int64_t n_rows, int64_t n_features) {
  std::string text;
  for (int64_t r = 0; r < n_rows; ++r) {
    append_number(text, labels[r]);
    for (auto k = static_cast<int64_t>(indptr[r]); k < static_cast<int64_t>(indptr[r + 1]); ++k) {
      const double v = static_cast<double>(data[k]);
      if (v == 0) continue;  // an explicit zero is a zero (scikit-learn's meaning)
      const auto column = static_cast<int64_t>(indices[k]);
      if (column < 0 || column >= n_features)
        throw fgm::Error(fgm::ErrorKind::kInvalidInput,
                         fmt::format("row {}: column index {} is outside [0, {})", r, column, n_features));
      text += ' ';
      char buffer[24];
      auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, column + 1);  // LIBSVM ids start at 1
      text.append(buffer, end);
      text += ':';
      append_number(text, v);
    }
    text += '\n';
    if (text.size() > (1 << 20)) {
      file.write(text.data(), static_cast<std::streamsize>(text.size()));
      text.clear();
    }
  }
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
}

template <typename Ptr, typename Index>
void write_rows_for_values(std::ofstream& file, const Ptr* indptr, const Index* indices, const py::array& data,
                           const double* labels, int64_t n_rows, int64_t n_features) {
  if (py::isinstance<py::array_t<float>>(data))
    write_rows(file, indptr, indices, static_cast<const float*>(data.data()), labels, n_rows, n_features);
  else
    write_rows(file, indptr, indices, static_cast<const double*>(data.data()), labels, n_rows, n_features);
}

template <typename Ptr>
void write_rows_for_indices(std::ofstream& file, const Ptr* indptr, const py::array& indices, const py::array& data,
                            const double* labels, int64_t n_rows, int64_t n_features) {
  if (py::isinstance<py::array_t<int32_t>>(indices))
    write_rows_for_values(file, indptr, static_cast<const int32_t*>(indices.data()), data, labels, n_rows, n_features);
  else
    write_rows_for_values(file, indptr, static_cast<const int64_t*>(indices.data()), data, labels, n_rows, n_features);
}

// Index arrays int32 or int64, values float32 or float64, C-contiguous (the
// Python side converts anything else).
void check_arrays(const py::array& indptr, const py::array& indices, const py::array& data, int64_t n_rows) {
  auto is_index = [](const py::array& a) {
    return py::isinstance<py::array_t<int32_t>>(a) || py::isinstance<py::array_t<int64_t>>(a);
  };
  if (!is_index(indptr) || !is_index(indices))
    throw std::invalid_argument("indptr and indices must be int32 or int64 arrays");
  if (!py::isinstance<py::array_t<float>>(data) && !py::isinstance<py::array_t<double>>(data))
    throw std::invalid_argument("data must be a float32 or float64 array");
  for (const py::array* a : {&indptr, &indices, &data})
    if (a->ndim() != 1 || !(a->flags() & py::array::c_style))
      throw std::invalid_argument("CSR arrays must be one-dimensional and contiguous");
  if (indptr.shape(0) != n_rows + 1) throw std::invalid_argument("indptr must have n_rows + 1 entries");
  if (indices.shape(0) != data.shape(0)) throw std::invalid_argument("indices and data differ in length");
}

void write_libsvm(const std::string& path, const py::array& indptr, const py::array& indices, const py::array& data,
                  const py::array_t<double, py::array::c_style | py::array::forcecast>& labels, int64_t n_features) {
  const int64_t n_rows = labels.shape(0);
  check_arrays(indptr, indices, data, n_rows);
  const double* label_values = labels.data();
  py::gil_scoped_release release;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw fgm::Error(fgm::ErrorKind::kIo, fmt::format("cannot create {}", path));
  if (py::isinstance<py::array_t<int32_t>>(indptr))
    write_rows_for_indices(file, static_cast<const int32_t*>(indptr.data()), indices, data, label_values, n_rows,
                           n_features);
  else
    write_rows_for_indices(file, static_cast<const int64_t*>(indptr.data()), indices, data, label_values, n_rows,
                           n_features);
  file.flush();
  if (!file) throw fgm::Error(fgm::ErrorKind::kIo, fmt::format("cannot write {}", path));
}

// ---- models

fgm::Model model_of(const py::bytes& bytes) {
  return fgm::decode_model(std::string_view(bytes), "<model bytes>");
}

py::list features_of(const std::vector<fgm::ModelFeature>& features) {
  py::list out;
  for (const auto& f : features) {
    py::dict d;
    d["kind"] = fgm::feature_kind_name(f.key.kind);
    py::list ids;
    ids.append(f.key.ids[0]);
    if (f.key.kind == fgm::FeatureKind::kCross) ids.append(f.key.ids[1]);
    d["ids"] = ids;  // 0-based column indices
    d["level"] = (f.key.kind == fgm::FeatureKind::kHik || f.key.kind == fgm::FeatureKind::kAdditive)
                     ? py::object(py::int_(f.key.level))
                     : py::object(py::none());
    d["group"] = f.key.group == UINT64_MAX ? py::object(py::none()) : py::object(py::int_(f.key.group));
    d["weight"] = f.weight;
    d["batch"] = f.batch;
    out.append(d);
  }
  return out;
}

// The model's fields a Python caller needs (features with 0-based ids).
py::dict describe_model(const py::bytes& bytes) {
  const fgm::Model m = model_of(bytes);
  py::dict d;
  d["engine_version"] = m.engine_version;
  d["solver"] = m.solver;
  d["loss"] = m.loss;
  d["C"] = m.C;
  d["B"] = m.B;
  d["iterations"] = m.iterations;
  d["has_bias"] = m.has_bias;
  d["bias"] = m.bias;
  d["n_features"] = m.n_features;
  d["index_base"] = m.index_base;
  d["positive_label"] = m.positive_label;
  d["negative_label"] = m.negative_label;
  d["feature_kind"] = m.feature_kind;
  d["objective"] = m.objective;
  d["has_kernel_svm"] = m.has_kernel_svm();
  d["features"] = features_of(m.features);
  py::list classes;
  for (const auto& c : m.classes) {
    py::dict cd;
    cd["label"] = c.label;
    cd["features"] = features_of(c.features);
    cd["bias"] = c.bias;
    cd["objective"] = c.objective;
    cd["iterations"] = c.iterations;
    classes.append(cd);
  }
  d["classes"] = classes;
  py::dict kernel;
  if (m.has_kernel_svm()) {
    kernel["kernel"] = m.kernel_svm.kernel;
    kernel["feature_ids"] = m.kernel_svm.feature_ids;  // 0-based
    kernel["kernel_weights"] = m.kernel_svm.kernel_weights;
    kernel["bandwidths"] = m.kernel_svm.bandwidths;
    kernel["support_vectors"] = m.kernel_svm.n_support();
  }
  d["kernel_svm"] = kernel;
  py::list transforms;
  for (const auto& t : m.transforms) transforms.append(t.name);
  d["transforms"] = transforms;
  d["config"] = m.config;
  return d;
}

// Decision values (n_rows x K; K = 1 for a binary model, the class count for a
// one-vs-rest model) of CSR rows with canonical (sorted, unique) indices.
template <typename Ptr, typename Index, typename Value>
void score_rows(const std::vector<fgm::ModelScorer>& scorers, const Ptr* indptr, const Index* indices,
                const Value* data, int64_t n_rows, double* out) {
  const size_t K = scorers.size();
  std::vector<uint64_t> row_ids;
  std::vector<float> row_values;
  for (int64_t r = 0; r < n_rows; ++r) {
    row_ids.clear();
    row_values.clear();
    for (auto k = static_cast<int64_t>(indptr[r]); k < static_cast<int64_t>(indptr[r + 1]); ++k) {
      row_ids.push_back(static_cast<uint64_t>(indices[k]));
      row_values.push_back(static_cast<float>(data[k]));
    }
    for (size_t c = 0; c < K; ++c) {
      const double d = scorers[c].decision(row_ids.data(), row_values.data(), row_ids.size());
      if (!std::isfinite(d))
        throw fgm::Error(fgm::ErrorKind::kInvalidInput,
                         fmt::format("row {}: the decision value is {} ({})", r, d,
                                     scorers[c].non_finite_cause(row_ids.data(), row_values.data(), row_ids.size())));
      out[r * K + c] = d;
    }
  }
}

template <typename Ptr, typename Index>
void score_for_values(const std::vector<fgm::ModelScorer>& scorers, const Ptr* indptr, const Index* indices,
                      const py::array& data, int64_t n_rows, double* out) {
  if (py::isinstance<py::array_t<float>>(data))
    score_rows(scorers, indptr, indices, static_cast<const float*>(data.data()), n_rows, out);
  else
    score_rows(scorers, indptr, indices, static_cast<const double*>(data.data()), n_rows, out);
}

template <typename Ptr>
void score_for_indices(const std::vector<fgm::ModelScorer>& scorers, const Ptr* indptr, const py::array& indices,
                       const py::array& data, int64_t n_rows, double* out) {
  if (py::isinstance<py::array_t<int32_t>>(indices))
    score_for_values(scorers, indptr, static_cast<const int32_t*>(indices.data()), data, n_rows, out);
  else
    score_for_values(scorers, indptr, static_cast<const int64_t*>(indices.data()), data, n_rows, out);
}

// The model's scorers: one per class of a multi-class model (each over its
// entry of `class_models`, filled here: the scorers hold references), else
// one over `model`.
std::vector<fgm::ModelScorer> scorers_of(const fgm::Model& model, std::vector<fgm::Model>& class_models) {
  for (size_t k = 0; k < model.classes.size(); ++k) class_models.push_back(fgm::class_model(model, k));
  std::vector<fgm::ModelScorer> scorers;
  if (model.multiclass())
    for (const auto& m : class_models) scorers.emplace_back(m);
  else
    scorers.emplace_back(model);
  return scorers;
}

py::array_t<double> decision_values(const py::bytes& bytes, const py::array& indptr, const py::array& indices,
                                    const py::array& data, int64_t n_rows) {
  check_arrays(indptr, indices, data, n_rows);
  const fgm::Model model = model_of(bytes);
  std::vector<fgm::Model> class_models;
  const std::vector<fgm::ModelScorer> scorers = scorers_of(model, class_models);
  const auto K = static_cast<py::ssize_t>(scorers.size());
  py::array_t<double> out({static_cast<py::ssize_t>(n_rows), K});
  double* values = out.mutable_data();
  {
    py::gil_scoped_release release;
    if (py::isinstance<py::array_t<int32_t>>(indptr))
      score_for_indices(scorers, static_cast<const int32_t*>(indptr.data()), indices, data, n_rows, values);
    else
      score_for_indices(scorers, static_cast<const int64_t*>(indptr.data()), indices, data, n_rows, values);
  }
  return out;
}

// Decision values (n_rows x K) and the labels of a LIBSVM file (plain or
// compressed) under a model, read row by row as `fgm predict` reads it
// (features beyond the model's width ignored, the model's index base).
py::tuple file_decision_values(const py::bytes& bytes, const std::string& path, uint64_t memory_budget) {
  const fgm::Model model = model_of(bytes);
  std::vector<fgm::Model> class_models;
  const std::vector<fgm::ModelScorer> scorers = scorers_of(model, class_models);
  const size_t K = scorers.size();
  std::vector<double> values, labels;
  {
    py::gil_scoped_release release;
    fgm::ReaderOptions options;
    options.max_line_bytes = fgm::max_line_bytes_for(memory_budget);
    options.max_line_key = "memory_budget";
    options.index_base = model.index_base;
    options.declared_features = model.n_features;
    options.ignore_beyond_declared = true;
    fgm::LibsvmReader reader(path, options);
    fgm::SparseRow row;
    while (reader.next(row)) {
      fgm::check_interrupt();
      labels.push_back(row.label);
      for (size_t c = 0; c < K; ++c) {
        const double d = scorers[c].decision(row.indices.data(), row.values.data(), row.indices.size());
        if (!std::isfinite(d))
          throw fgm::Error(fgm::ErrorKind::kInvalidInput,
                           fmt::format("{}:{}: the decision value is {} ({})", path, row.line, d,
                                       scorers[c].non_finite_cause(row.indices.data(), row.values.data(),
                                                                   row.indices.size())));
        values.push_back(d);
      }
    }
  }
  py::array_t<double> out({static_cast<py::ssize_t>(labels.size()), static_cast<py::ssize_t>(K)});
  std::copy(values.begin(), values.end(), out.mutable_data());
  py::array_t<double> label_array(static_cast<py::ssize_t>(labels.size()));
  std::copy(labels.begin(), labels.end(), label_array.mutable_data());
  return py::make_tuple(out, label_array);
}

// A model file's bytes, verified (magic, checksum, FlatBuffer, version) first.
py::bytes read_model_bytes(const std::string& path) {
  fgm::read_model(path);
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file && !file.eof()) throw fgm::Error(fgm::ErrorKind::kIo, fmt::format("cannot read {}", path));
  return py::bytes(bytes);
}

// Writes the bytes as they are (verified first), under a temporary name then renamed.
void write_model_bytes(const std::string& path, const py::bytes& bytes) {
  model_of(bytes);
  fgm::write_file_atomic(path, std::string_view(bytes));
}

}  // namespace

PYBIND11_MODULE(_fgm, m) {
  m.doc() = "fgm's C++ engine (the CLI's commands, model files and scorer); use the fgm package, not this module";
  m.attr("__version__") = FGM_VERSION;

  // Engine errors -> Python exceptions by kind; the message is the engine's.
  static py::exception<fgm::Error> corruption(m, "CorruptModelError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fgm::Error& e) {
      switch (e.kind()) {
        case fgm::ErrorKind::kConfig:
        case fgm::ErrorKind::kInvalidInput: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case fgm::ErrorKind::kIo: PyErr_SetString(PyExc_OSError, e.what()); return;
        case fgm::ErrorKind::kCorruption: corruption(e.what()); return;
        case fgm::ErrorKind::kOutOfMemory: PyErr_SetString(PyExc_MemoryError, e.what()); return;
        case fgm::ErrorKind::kInternal: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    } catch (const std::filesystem::filesystem_error& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const std::ios_base::failure& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });

  auto logger = std::make_shared<spdlog::logger>("fgm", std::make_shared<PythonSink>());
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);

  m.def("set_log_callback", [](py::object callback) { log_callback() = std::move(callback); },
        "callable(level, message) that receives the engine's log lines (None: drop them)");
  m.def("run_command", &run,
        "run one fgm command (argument list without the program name) in this process, its stdout captured in "
        "the given file; returns (exit code, stdout text)",
        py::arg("args"), py::arg("stdout_path"));
  m.def("write_libsvm", &write_libsvm, "CSR arrays and labels -> a LIBSVM text file (1-based ids)",
        py::arg("path"), py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("labels"),
        py::arg("n_features"));
  m.def("describe_model", &describe_model, "model file bytes -> dict of its fields", py::arg("model"));
  m.def("decision_values", &decision_values, "decision values (n_rows x K) of CSR rows under a model",
        py::arg("model"), py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("n_rows"));
  m.def("file_decision_values", &file_decision_values,
        "decision values (n_rows x K) and labels of a LIBSVM file under a model", py::arg("model"), py::arg("path"),
        py::arg("memory_budget"));
  m.def("read_model", &read_model_bytes, "read and verify a model file; its bytes", py::arg("path"));
  m.def("write_model", &write_model_bytes, "write model bytes as a model file (atomically)", py::arg("path"),
        py::arg("model"));
  // No log callback once the interpreter shuts down.
  py::module_::import("atexit").attr("register")(py::cpp_function([]() { log_callback() = py::none(); }));
}
