<?php
// Gearman worker for the interop suite (php-gearman extension).
//
// usage: php worker.php PORT MODE FUNC[,FUNC...] [COUNT] [LOGFILE] [GATEFILE]
//   COUNT    exit after this many jobs (0 = run until killed)
//   LOGFILE  file to append one line per job start ("<mode> <workload> <pid>")
//   GATEFILE for modes "gated" and "stream": block until this file exists (bounded: 20 s);
//            for modes "flaky" and "flakyexc": K, the failing runs per workload (default 2)
// modes:
//   rev      return strrev(workload)
//   upper    return strtoupper(workload)
//   record   append workload to LOGFILE, return "ok:<workload>"
//   count    append to LOGFILE, return "ran:<pid>"
//   chatty   sendData d1, sendStatus 1/3, sendWarning w1, sendStatus 2/3,
//            sendData d2, return "done:<workload>"
//   fail     sendFail, report GEARMAN_WORK_FAIL
//   exception sendException("boom:<workload>"), report GEARMAN_WORK_EXCEPTION
//   gated    sendStatus 1/2, log, wait for GATEFILE, return "gated:<workload>"
//   hang     log, then sleep up to 60 s (to be killed mid-job)
//   stream   sendData "part1\n", log, wait for GATEFILE, sendData "part2\n",
//            return "end:<workload>"
//   flaky    n = this run's number for this workload (counted in LOGFILE, which
//            is required); log "<workload> <handle> <n>"; while n <= K:
//            sendFail, report GEARMAN_WORK_FAIL; after: return "ok:<workload>:<n>"
//   flakyexc as flaky, but the failing runs sendException("boom:<workload>:<n>")
//            and report GEARMAN_WORK_EXCEPTION
//   sleep    log "<workload> <handle> <n>", sleep (float)workload seconds (at most
//            60), return "slept:<workload>"; GATEFILE, if given, is the timeout
//            passed to addFunction (seconds, as php.net documents it)
// Prints nothing on success; errors go to stderr with exit code 1.

$port  = (int)$argv[1];
$mode  = $argv[2];
$funcs = explode(',', $argv[3]);
$count = isset($argv[4]) ? (int)$argv[4] : 0;
$log   = isset($argv[5]) && $argv[5] !== '' ? $argv[5] : null;
$gate  = isset($argv[6]) ? $argv[6] : null;

// Numbers this run of workload $w (1 = first) by the lines of $log whose first
// field is $w, and appends "<w> <handle> <n>"; locked, so workers may share $log.
function count_run($log, $w, $handle) {
    $fh = fopen($log, 'a+');
    flock($fh, LOCK_EX);
    rewind($fh);
    $n = 1;
    while (($line = fgets($fh)) !== false) {
        if (explode(' ', rtrim($line, "\n"), 2)[0] === $w) {
            $n++;
        }
    }
    fwrite($fh, "$w $handle $n\n");
    fflush($fh);
    flock($fh, LOCK_UN);
    fclose($fh);
    return $n;
}

function logline($log, $line) {
    if ($log !== null) {
        file_put_contents($log, $line . "\n", FILE_APPEND | LOCK_EX);
    }
}

$handler = function (GearmanJob $job) use ($mode, $log, $gate) {
    $w = $job->workload();
    switch ($mode) {
    case 'rev':
        return strrev($w);
    case 'upper':
        return strtoupper($w);
    case 'record':
        logline($log, $w);
        return "ok:" . $w;
    case 'count':
        logline($log, "ran " . getmypid());
        return "ran:" . getmypid();
    case 'chatty':
        $job->sendData("d1");
        $job->sendStatus(1, 3);
        $job->sendWarning("w1");
        $job->sendStatus(2, 3);
        $job->sendData("d2");
        return "done:" . $w;
    case 'fail':
        $job->sendFail();
        $job->setReturn(GEARMAN_WORK_FAIL);
        return null;
    case 'exception':
        $job->sendException("boom:" . $w);
        $job->setReturn(GEARMAN_WORK_EXCEPTION);
        return null;
    case 'gated':
        $job->sendStatus(1, 2);
        logline($log, "started " . $job->handle());
        $deadline = microtime(true) + 20;
        while (!file_exists($gate) && microtime(true) < $deadline) {
            usleep(10000);
        }
        return "gated:" . $w;
    case 'stream':
        $job->sendData("part1\n");
        logline($log, "started " . $job->handle());
        $deadline = microtime(true) + 20;
        while (!file_exists($gate) && microtime(true) < $deadline) {
            usleep(10000);
        }
        $job->sendData("part2\n");
        return "end:" . $w;
    case 'hang':
        logline($log, "hang " . getmypid());
        sleep(60);
        return "hang:" . $w;
    case 'flaky':
    case 'flakyexc':
        $k = ($gate === null || $gate === '') ? 2 : (int)$gate;
        $n = count_run($log, $w, $job->handle());
        if ($n > $k) {
            return "ok:" . $w . ":" . $n;
        }
        if ($mode === 'flaky') {
            $job->sendFail();
            $job->setReturn(GEARMAN_WORK_FAIL);
        } else {
            $job->sendException("boom:" . $w . ":" . $n);
            $job->setReturn(GEARMAN_WORK_EXCEPTION);
        }
        return null;
    case 'sleep':
        count_run($log, $w, $job->handle());
        usleep((int)(min((float)$w, 60.0) * 1000000));
        return "slept:" . $w;
    }
    fwrite(STDERR, "unknown mode $mode\n");
    exit(2);
};

$worker = new GearmanWorker();
$worker->addServer('127.0.0.1', $port);
$worker->setId('php-' . $mode);
$worker->setTimeout(1000);  // work() returns periodically; we just loop
$timeout = ($mode === 'sleep' && $gate !== null && $gate !== '') ? (int)$gate : 0;
foreach ($funcs as $f) {
    $worker->addFunction($f, $handler, null, $timeout);
}
$done = 0;
$deadline = microtime(true) + 120;  // hard cap so a stray worker never lingers
while (($count == 0 || $done < $count) && microtime(true) < $deadline) {
    $ok = @$worker->work();
    $rc = $worker->returnCode();
    if ($rc == GEARMAN_TIMEOUT || $rc == GEARMAN_IO_WAIT || $rc == GEARMAN_NO_JOBS) {
        continue;
    }
    if ($rc == GEARMAN_SUCCESS || $rc == GEARMAN_WORK_FAIL || $rc == GEARMAN_WORK_EXCEPTION) {
        $done++;
        continue;
    }
    if ($rc == GEARMAN_COULD_NOT_CONNECT || $rc == GEARMAN_LOST_CONNECTION) {
        usleep(50000);
        continue;
    }
    fwrite(STDERR, "work() rc=$rc: " . $worker->error() . "\n");
    usleep(50000);
}
exit(0);
