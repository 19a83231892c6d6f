import { spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * test:soak: runs the test suite N times, one vitest process per run as `npm test` runs it, and
 * tells which tests failed how often: a flaky test fails in one run of several, so one green run
 * says little.
 *   npm run test:soak -- [N=10] [vitest filters and options, e.g. test/integration/cluster.test.ts]
 * Exits 1 when any run failed. Each run's output and JSON report stay in the directory it prints.
 */

interface Assertion {
  fullName: string;
  status: string;
  failureMessages: string[];
}

interface Report {
  testResults: Array<{ name: string; status: string; message: string; assertionResults: Assertion[] }>;
}

interface Failure {
  runs: number[];
  message: string;
}

const [first, ...rest] = process.argv.slice(2);
const counted = first !== undefined && /^\d+$/.test(first);
const runs = counted ? Number(first) : 10;
const vitestArgs = counted ? rest : process.argv.slice(2);
if (runs < 1) {
  console.error("usage: npm run test:soak -- [N >= 1] [vitest arguments]");
  process.exit(2);
}

const vitest = join(process.cwd(), "node_modules", ".bin", "vitest");
const dir = mkdtempSync(join(tmpdir(), "servicelb-soak-"));
const failures = new Map<string, Failure>();
let failedRuns = 0;

const firstLine = (text: string) => (text.split("\n").find((l) => l.trim() !== "") ?? "").trim().slice(0, 240);

console.log(`soak: ${runs} run(s) of vitest ${vitestArgs.join(" ")}; logs and reports in ${dir}`);
for (let run = 1; run <= runs; run++) {
  const report = join(dir, `run-${run}.json`);
  const log = join(dir, `run-${run}.log`);
  const started = performance.now();
  const code = await new Promise<number>((resolve, reject) => {
    const out = createWriteStream(log);
    const child = spawn(vitest, ["run", ...vitestArgs, "--reporter=json", `--outputFile=${report}`], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    child.on("error", reject);
    child.on("close", (c) => out.end(() => resolve(c ?? 1)));
  });
  const seconds = Math.round((performance.now() - started) / 1000);

  let problems = 0;
  const note = (key: string, message: string) => {
    const f = failures.get(key) ?? { runs: [], message: firstLine(message) };
    f.runs.push(run);
    failures.set(key, f);
    problems++;
  };
  let failedTests = 0;
  let passedTests = 0;
  if (existsSync(report)) {
    const result = JSON.parse(readFileSync(report, "utf8")) as Report;
    for (const file of result.testResults) {
      const name = file.name.startsWith(process.cwd()) ? file.name.slice(process.cwd().length + 1) : file.name;
      for (const a of file.assertionResults) {
        if (a.status === "passed") passedTests++;
        if (a.status !== "failed") continue;
        failedTests++;
        note(`${name} > ${a.fullName}`, a.failureMessages[0] ?? "");
      }
      // A file that failed outside its tests: it did not load, or a hook threw.
      if (file.status === "failed" && file.message) note(`${name} (the file itself)`, file.message);
    }
    // Unhandled errors fail the run without failing a test; vitest's own output names them.
    if (code !== 0 && problems === 0) note("(a run with errors outside any test)", `see ${log}`);
  } else {
    note("(a run without a report)", `vitest exited ${code}; see ${log}`);
  }
  if (code !== 0 || problems > 0) failedRuns++;
  console.log(
    `run ${run}/${runs}: ${code === 0 && problems === 0 ? "passed" : "FAILED"} (${passedTests} passed, ${failedTests} failed, ${seconds} s)`,
  );
}

console.log(`\n${runs - failedRuns} of ${runs} run(s) passed`);
if (failures.size > 0) {
  console.log("failed, by how many runs:");
  const sorted = [...failures].sort(([a, x], [b, y]) => y.runs.length - x.runs.length || (a < b ? -1 : 1));
  for (const [name, f] of sorted) {
    console.log(`  ${f.runs.length}/${runs}  ${name}  (run ${f.runs.join(", ")})`);
    console.log(`         ${f.message}`);
  }
}
process.exit(failedRuns > 0 ? 1 : 0);
