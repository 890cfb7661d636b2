#!/usr/bin/perl
# Gearman worker for the interop suite (Gearman::Worker, libgearman-client-perl).
#
# usage: perl worker.pl PORT MODE FUNC[,FUNC...] [COUNT] [LOGFILE]
#   COUNT   exit after this many jobs (0 = run until killed)
#   LOGFILE append one line per job (the workload)
# modes (applied to every FUNC):
#   rev     return reverse(workload)
#   upper   return uc(workload)
#   record  append workload to LOGFILE, return "ok:<workload>"
#   multi   FUNC list is registered with per-function behaviour: a function
#           whose name starts with "rev" reverses, "upper" upper-cases
use strict;
use warnings;
use Gearman::Worker;

my ($port, $mode, $funcs, $count, $log) = @ARGV;
$count ||= 0;

sub logline {
    my ($line) = @_;
    return unless defined $log && length $log;
    open(my $fh, '>>', $log) or die "open $log: $!";
    print $fh "$line\n";
    close $fh;
}

my %impl = (
    rev    => sub { return scalar reverse($_[0]->arg) },
    upper  => sub { return uc($_[0]->arg) },
    record => sub { logline($_[0]->arg); return "ok:" . $_[0]->arg },
);

my $worker = Gearman::Worker->new(job_servers => ["127.0.0.1:$port"], client_id => "perl-$mode");
for my $f (split /,/, $funcs) {
    my $m = $mode;
    if ($mode eq 'multi') {
        ($m) = grep { $f =~ /^\Q$_\E/ } qw(rev upper record);
        die "no behaviour for $f" unless $m;
    }
    die "unknown mode $m" unless $impl{$m};
    $worker->register_function($f => $impl{$m});
}

my $done = 0;
my $deadline = time + 120;    # hard cap so a stray worker never lingers
$worker->work(
    on_complete => sub { $done++ },
    on_fail     => sub { $done++ },
    stop_if     => sub { ($count && $done >= $count) || time > $deadline },
);
exit 0;
