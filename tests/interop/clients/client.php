<?php
// Gearman client for the interop suite (php-gearman extension).
//
// usage: php client.php PORT MODE ARGS...
//   do   PRIO FUNC DATA [UNIQUE]   PRIO = normal|high|low; prints "RESULT:<r>",
//                                  "FAIL" or "EXCEPTION:<msg>"
//   bg   FUNC PRIO:DATA ...        background submits in order; prints one handle per line
//   status HANDLE                  prints "known running num den"
//   tasks FUNC DATA...             addTask each + runTasks; prints "<data>=<result>" per task
//   callbacks FUNC DATA            prints every callback event, one per line
//   failcb FUNC DATA               addTask with fail/complete callbacks; prints "FAILED" or result
//   exccb FUNC DATA                addTask with exception/fail/complete callbacks
// Exit code 0 when the call itself completed (even if the job failed).

$port = (int)$argv[1];
$mode = $argv[2];
$args = array_slice($argv, 3);

$client = new GearmanClient();
$client->addServer('127.0.0.1', $port);
$client->setTimeout(15000);

function report_do($client, $result) {
    $rc = $client->returnCode();
    if ($rc == GEARMAN_SUCCESS) {
        echo "RESULT:", $result, "\n";
    } elseif ($rc == GEARMAN_WORK_FAIL) {
        echo "FAIL\n";
    } elseif ($rc == GEARMAN_WORK_EXCEPTION) {
        echo "EXCEPTION:", $result, "\n";
    } else {
        echo "ERROR rc=$rc ", $client->error(), "\n";
        exit(1);
    }
}

switch ($mode) {
case 'do':
    list($prio, $func, $data) = $args;
    $uniq = isset($args[3]) ? $args[3] : null;
    $method = array('normal' => 'doNormal', 'high' => 'doHigh', 'low' => 'doLow')[$prio];
    do {
        $result = $uniq === null ? $client->$method($func, $data) : $client->$method($func, $data, $uniq);
    } while ($client->returnCode() == GEARMAN_WORK_DATA || $client->returnCode() == GEARMAN_WORK_STATUS
             || $client->returnCode() == GEARMAN_WORK_WARNING);
    report_do($client, $result);
    break;

case 'bg':
    $func = array_shift($args);
    foreach ($args as $spec) {
        list($prio, $data) = explode(':', $spec, 2);
        $method = array('normal' => 'doBackground', 'high' => 'doHighBackground',
                        'low' => 'doLowBackground')[$prio];
        $h = $client->$method($func, $data);
        if ($client->returnCode() != GEARMAN_SUCCESS) {
            echo "ERROR rc=", $client->returnCode(), " ", $client->error(), "\n";
            exit(1);
        }
        echo $h, "\n";
    }
    break;

case 'status':
    $st = $client->jobStatus($args[0]);
    if ($client->returnCode() != GEARMAN_SUCCESS) {
        echo "ERROR rc=", $client->returnCode(), " ", $client->error(), "\n";
        exit(1);
    }
    echo ($st[0] ? 1 : 0), " ", ($st[1] ? 1 : 0), " ", $st[2], " ", $st[3], "\n";
    break;

case 'tasks':
    $func = array_shift($args);
    $results = array();
    $client->setCompleteCallback(function (GearmanTask $t, $ctx) use (&$results) {
        $results[$ctx] = $t->data();
    });
    $client->setFailCallback(function (GearmanTask $t, $ctx) use (&$results) {
        $results[$ctx] = "FAILED";
    });
    foreach ($args as $i => $d) {
        $client->addTask($func, $d, $i);
    }
    if (!$client->runTasks()) {
        echo "ERROR runTasks ", $client->error(), "\n";
        exit(1);
    }
    foreach ($args as $i => $d) {
        echo $d, "=", isset($results[$i]) ? $results[$i] : "MISSING", "\n";
    }
    break;

case 'callbacks':
case 'failcb':
case 'exccb':
    list($func, $data) = $args;
    $client->setDataCallback(function (GearmanTask $t) { echo "DATA:", $t->data(), "\n"; });
    $client->setWarningCallback(function (GearmanTask $t) { echo "WARNING:", $t->data(), "\n"; });
    $client->setStatusCallback(function (GearmanTask $t) {
        echo "STATUS:", $t->taskNumerator(), "/", $t->taskDenominator(), "\n";
    });
    $client->setCompleteCallback(function (GearmanTask $t) { echo "COMPLETE:", $t->data(), "\n"; });
    $client->setFailCallback(function (GearmanTask $t) { echo "FAILED\n"; });
    $client->setExceptionCallback(function (GearmanTask $t) { echo "EXCEPTION:", $t->data(), "\n"; });
    $client->addTask($func, $data);
    if (!$client->runTasks()) {
        echo "ERROR runTasks rc=", $client->returnCode(), " ", $client->error(), "\n";
        exit(1);
    }
    break;

default:
    fwrite(STDERR, "unknown mode $mode\n");
    exit(2);
}
exit(0);
