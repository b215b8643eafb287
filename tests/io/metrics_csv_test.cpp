// The metrics file's one layout (io/metrics_csv.h): rows written and read back exactly, columns
// in any order, and every kind of bad file refused in one line naming the file and the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/error_of.h"
#include "tlaloc/io/metrics_csv.h"

using namespace tlaloc;
using tlaloc::testing::error_of;

namespace {

const std::string kHeader = "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s\n";

std::string parse_error(const std::string& text) {
  return error_of([&] { io::parse_metrics(text, "runs/a.csv", "plot"); });
}

}  // namespace

TEST(MetricsCsv, RowsReadBackExactlyWithEmptyCellsAsNaN) {
  EXPECT_EQ(io::metrics_header(), kHeader);
  io::MetricsRow step;
  step.step = 50;
  step.train_loss = 0.1 + 0.2;  // needs all 17 digits to read back
  step.lr = 3e-3;
  step.wall_s = 1.25;
  io::MetricsRow epoch{"epoch", 469, 1, 0.6289, 0.5062, 0.8186, 0.003, 1.34, 0};
  io::MetricsRow final{"final", 600, 1, NAN, 0.17, 0.97, 0.02, 0.26, 0};
  EXPECT_EQ(io::format_metrics_row(step), "step,50,1,0.30000000000000004,,,0.003,1.25\n");
  EXPECT_EQ(io::format_metrics_row(final), "final,600,1,,0.17,0.97,0.02,0.26\n");
  const std::string text = io::metrics_header() + io::format_metrics_row(step) +
                           io::format_metrics_row(epoch) + io::format_metrics_row(final);
  const auto rows = io::parse_metrics(text, "m.csv", "plot");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].kind, "step");
  EXPECT_EQ(rows[0].step, 50);
  EXPECT_EQ(rows[0].epoch, 1);
  EXPECT_EQ(rows[0].train_loss, 0.1 + 0.2);
  EXPECT_TRUE(std::isnan(rows[0].val_loss));
  EXPECT_TRUE(std::isnan(rows[0].val_accuracy));
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[1].val_accuracy, 0.8186);
  EXPECT_EQ(rows[1].line, 3);
  EXPECT_EQ(rows[2].kind, "final");
  EXPECT_TRUE(std::isnan(rows[2].train_loss));
  EXPECT_EQ(rows[2].wall_s, 0.26);
}

TEST(MetricsCsv, ColumnsInAnyOrderAndWindowsLineEnds) {
  const auto rows = io::parse_metrics(
      "wall_s,lr,val_accuracy,val_loss,train_loss,epoch,step,kind\r\n2,0.1,,,0.5,3,40,eval\r\n",
      "m.csv", "plot");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].kind, "eval");
  EXPECT_EQ(rows[0].step, 40);
  EXPECT_EQ(rows[0].epoch, 3);
  EXPECT_EQ(rows[0].train_loss, 0.5);
  EXPECT_EQ(rows[0].lr, 0.1);
  EXPECT_EQ(rows[0].wall_s, 2);
}

TEST(MetricsCsv, BadFilesAreRefusedNamingTheFileAndTheLine) {
  const std::string layout =
      "(the layout is kind,step,epoch,train_loss,val_loss,val_accuracy,lr,"
      "wall_s)";
  EXPECT_EQ(parse_error(""), "plot: runs/a.csv line 1: the file is empty (no header, no rows)");
  EXPECT_EQ(parse_error(kHeader), "plot: runs/a.csv line 2: no rows (only the header)");
  // A missing column, an unknown one (the layout before this one), a repeated one.
  EXPECT_EQ(parse_error("kind,step,epoch,train_loss,val_loss,val_accuracy,lr\nstep,1,1,2,,,0.1\n"),
            "plot: runs/a.csv line 1: no column 'wall_s' " + layout);
  EXPECT_EQ(parse_error("kind,step,epoch,train_loss,test_loss,seconds\nstep,1,1,2,,3\n"),
            "plot: runs/a.csv line 1: unknown column \"test_loss\" " + layout);
  EXPECT_EQ(parse_error("step,step\n1,1\n"), "plot: runs/a.csv line 1: column step appears twice");
  // Cells.
  const std::string ok = "step,10,1,0.5,,,0.1,1\n";
  EXPECT_EQ(parse_error(kHeader + ok + ok + "step,30,1,abc,,,0.1,1\n"),
            "plot: runs/a.csv line 4: \"abc\" in column train_loss is not a number");
  EXPECT_EQ(parse_error(kHeader + "step,10,1,0.5,,,0.1x,1\n"),
            "plot: runs/a.csv line 2: \"0.1x\" in column lr is not a number");
  EXPECT_EQ(parse_error(kHeader + "step,10,1, 0.5,,,0.1,1\n"),
            "plot: runs/a.csv line 2: \" 0.5\" in column train_loss is not a number");
  EXPECT_EQ(parse_error(kHeader + "step,10,1,nan,,,0.1,1\n"),
            "plot: runs/a.csv line 2: \"nan\" in column train_loss is not a finite number");
  EXPECT_EQ(parse_error(kHeader + ok + "step,10,1,0.5,inf,,0.1,1\n"),
            "plot: runs/a.csv line 3: \"inf\" in column val_loss is not a finite number");
  EXPECT_EQ(parse_error(kHeader + "step,-10,1,0.5,,,0.1,1\n"),
            "plot: runs/a.csv line 2: \"-10\" in column step is not a whole number >= 0");
  EXPECT_EQ(parse_error(kHeader + "step,10,1.5,0.5,,,0.1,1\n"),
            "plot: runs/a.csv line 2: \"1.5\" in column epoch is not a whole number >= 0");
  EXPECT_EQ(parse_error(kHeader + "steps,10,1,0.5,,,0.1,1\n"),
            "plot: runs/a.csv line 2: kind \"steps\" is not step, epoch, eval or final");
  EXPECT_EQ(parse_error(kHeader + "step,10,1,0.5,,,0.1\n"),
            "plot: runs/a.csv line 2: 7 cells, the header has 8");
  EXPECT_EQ(parse_error(kHeader + ok + "\n" + ok), "plot: runs/a.csv line 3: the line is empty");
  // A long cell is cut in the message.
  EXPECT_EQ(parse_error(kHeader + "step,10,1," + std::string(50, 'x') + ",,,0.1,1\n"),
            "plot: runs/a.csv line 2: \"" + std::string(40, 'x') +
                "...\" in column train_loss is not a number");
}

TEST(MetricsCsv, FilesAndTheAppendCheck) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_metrics_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.csv").string();
  EXPECT_EQ(error_of([&] { io::read_metrics(path, "plot"); }),
            "plot: " + path + ": No such file or directory");
  EXPECT_EQ(error_of([&] { io::read_metrics(dir.string(), "plot"); }),
            "plot: " + dir.string() + " is a folder, not a metrics file");
  io::check_metrics_header(path, "--metrics");  // absent: fine
  std::ofstream(path) << "";
  io::check_metrics_header(path, "--metrics");  // empty: fine
  std::ofstream(path) << kHeader << "step,1,1,2,,,0.1,0.5\n";
  io::check_metrics_header(path, "--metrics");  // this layout: fine
  EXPECT_EQ(io::read_metrics(path, "plot").at(0).train_loss, 2);
  // A fresh run appending to another run's rows would draw the two as one curve.
  EXPECT_EQ(error_of([&] { io::check_metrics_header(path, "--metrics", true); }),
            "--metrics " + path +
                " holds the rows of another run; a new run writes a new file (--resume continues "
                "the run that wrote them)");
  std::ofstream(path) << kHeader;
  io::check_metrics_header(path, "--metrics", true);  // a header alone: fine
  // Bytes of a binary file are shown escaped (a NUL would end the message).
  std::ofstream(path, std::ios::binary) << std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  EXPECT_EQ(error_of([&] { io::check_metrics_header(path, "--metrics"); }),
            "--metrics " + path +
                " holds another layout (its header is \"\\x89PNG\", this version writes "
                "kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s); give a new file");
  std::ofstream(path) << "kind,step,epoch,train_loss,seconds\nstep,1,1,2,0.5\n";
  EXPECT_EQ(error_of([&] { io::check_metrics_header(path, "--metrics"); }),
            "--metrics " + path +
                " holds another layout (its header is \"kind,step,epoch,train_loss,seconds\", "
                "this version writes kind,step,epoch,train_loss,val_loss,val_accuracy,lr,wall_s); "
                "give a new file");
  std::filesystem::remove_all(dir);
}
