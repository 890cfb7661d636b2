#!/usr/bin/perl
# Gearman client for the interop suite (Gearman::Client, libgearman-client-perl).
#
# usage: perl client.pl PORT MODE ARGS...
#   do FUNC DATA [PRIO]        do_task; prints "RESULT:<r>" or "FAIL"
#   bg FUNC DATA [PRIO]        dispatch_background; prints the job handle
#   taskset FUNC DATA...       one task set, one task per DATA; prints "<data>=<result>"
# PRIO = normal|high|low
# GEARMAN_PREFIX set: the client's prefix option (names go out as "PREFIX\tFUNC").
use strict;
use warnings;
use Gearman::Client;

my ($port, $mode, @args) = @ARGV;
my $client = Gearman::Client->new(job_servers => ["127.0.0.1:$port"], command_timeout => 15,
    ($ENV{GEARMAN_PREFIX} ? (prefix => $ENV{GEARMAN_PREFIX}) : ()));

if ($mode eq 'do') {
    my ($func, $data, $prio) = @args;
    my $failed = 0;
    my $res = $client->do_task($func, $data, {
        timeout => 15,
        priority => ($prio || 'normal'),
        on_fail => sub { $failed = 1 },
    });
    if ($failed || !defined $res) { print "FAIL\n"; }
    else { print "RESULT:", $$res, "\n"; }
}
elsif ($mode eq 'bg') {
    my ($func, $data, $prio) = @args;
    my $h = $client->dispatch_background($func, $data, { priority => ($prio || 'normal') });
    die "dispatch_background failed\n" unless defined $h;
    print "$h\n";
}
elsif ($mode eq 'taskset') {
    my ($func, @data) = @args;
    my $ts = $client->new_task_set;
    my %res;
    for my $d (@data) {
        $ts->add_task($func, $d, {
            on_complete => sub { $res{$d} = ${ $_[0] } },
            on_fail     => sub { $res{$d} = 'FAILED' },
            timeout     => 15,
        });
    }
    $ts->wait(timeout => 15);
    for my $d (@data) { print "$d=", (defined $res{$d} ? $res{$d} : 'MISSING'), "\n"; }
}
else {
    die "unknown mode $mode\n";
}
exit 0;
