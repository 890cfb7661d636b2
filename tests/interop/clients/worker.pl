#!/usr/bin/perl
# Gearman worker for the interop suite (Gearman::Worker, libgearman-client-perl).
#
# usage: perl worker.pl PORT MODE FUNC[,FUNC...] [COUNT] [LOGFILE] [ARG]
#   COUNT   exit after this many jobs (0 = run until killed)
#   LOGFILE append one line per job (the workload)
#   ARG     modes "flaky" and "flakyfail": K, the failing runs per workload
#           (default 2);
#           mode "sleep": the timeout passed to register_function (sent as
#           CAN_DO_TIMEOUT as is; none when absent or empty)
# GEARMAN_PREFIX set: the worker's prefix option (names go out as "PREFIX\tFUNC").
# modes (applied to every FUNC):
#   rev     return reverse(workload)
#   upper   return uc(workload)
#   record  append workload to LOGFILE, return "ok:<workload>"
#   multi   FUNC list is registered with per-function behaviour: a function
#           whose name starts with "rev" reverses, "upper" upper-cases
#   flaky   n = this run's number for this workload (counted in LOGFILE, which
#           is required); append "<workload> <handle> <n>"; while n <= K:
#           die "boom:<workload>:<n>" (Gearman::Worker then sends
#           WORK_EXCEPTION with the frozen error, then WORK_FAIL); after:
#           return "ok:<workload>:<n>"
#   flakyfail as flaky, but the failing runs return undef (Gearman::Worker
#           then sends WORK_FAIL alone)
#   sleep   append "<workload> <handle> <n>", sleep workload seconds (at most
#           60), return "slept:<workload>"
use strict;
use warnings;
use Gearman::Worker;
use Fcntl qw(:flock);

my ($port, $mode, $funcs, $count, $log, $arg) = @ARGV;
$count ||= 0;

sub logline {
    my ($line) = @_;
    return unless defined $log && length $log;
    open(my $fh, '>>', $log) or die "open $log: $!";
    print $fh "$line\n";
    close $fh;
}

# Numbers this run of the workload (1 = first) by the lines of LOGFILE whose
# first field is the workload, and appends "<workload> <handle> <n>"; locked,
# so workers may share LOGFILE.
sub count_run {
    my ($job) = @_;
    my $w = $job->arg;
    open(my $fh, '+>>', $log) or die "open $log: $!";
    flock($fh, LOCK_EX) or die "flock $log: $!";
    seek($fh, 0, 0);
    my $n = 1;
    while (my $line = <$fh>) {
        chomp $line;
        $n++ if (split / /, $line, 2)[0] eq $w;
    }
    seek($fh, 0, 2);
    print $fh "$w " . $job->handle . " $n\n";
    close $fh;
    return $n;
}

my %impl = (
    rev    => sub { return scalar reverse($_[0]->arg) },
    upper  => sub { return uc($_[0]->arg) },
    record => sub { logline($_[0]->arg); return "ok:" . $_[0]->arg },
    flaky  => sub {
        my $k = (defined $arg && length $arg) ? $arg : 2;
        my $n = count_run($_[0]);
        die "boom:" . $_[0]->arg . ":$n\n" if $n <= $k;
        return "ok:" . $_[0]->arg . ":$n";
    },
    flakyfail => sub {
        my $k = (defined $arg && length $arg) ? $arg : 2;
        my $n = count_run($_[0]);
        return undef if $n <= $k;
        return "ok:" . $_[0]->arg . ":$n";
    },
    sleep  => sub {
        count_run($_[0]);
        my $secs = $_[0]->arg + 0;
        select(undef, undef, undef, $secs > 60 ? 60 : $secs);
        return "slept:" . $_[0]->arg;
    },
);

my $worker = Gearman::Worker->new(job_servers => ["127.0.0.1:$port"], client_id => "perl-$mode",
    ($ENV{GEARMAN_PREFIX} ? (prefix => $ENV{GEARMAN_PREFIX}) : ()));
for my $f (split /,/, $funcs) {
    my $m = $mode;
    if ($mode eq 'multi') {
        ($m) = grep { $f =~ /^\Q$_\E/ } qw(rev upper record);
        die "no behaviour for $f" unless $m;
    }
    die "unknown mode $m" unless $impl{$m};
    if ($m eq 'sleep' && defined $arg && length $arg) {
        $worker->register_function($f, $arg, $impl{$m});
    } else {
        $worker->register_function($f => $impl{$m});
    }
}

my $done = 0;
my $deadline = time + 120;    # hard cap so a stray worker never lingers
$worker->work(
    on_complete => sub { $done++ },
    on_fail     => sub { $done++ },
    stop_if     => sub { ($count && $done >= $count) || time > $deadline },
);
exit 0;
