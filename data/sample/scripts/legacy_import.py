# DELIBERATELY BROKEN: this file is Python 2 and does not parse under Python 3.
# It is kept in the Strata sample corpus to show how Strata records a parser
# fallback: the AST parser fails on the print statement below, so the file is
# indexed as plain text and the failure reason is stored with the node.
#
# Historical context: this is the importer Tidewater 0.1 used for the old
# fixed-width ".tgd" logger format, before tidewater.io.csv_reader existed.

import sys
import string

FIELD_WIDTHS = [(0, 12), (12, 20), (20, 28)]


def parse_line(line):
    stamp = line[0:12]
    level = string.atof(line[12:20]) / 1000.0
    pressure = string.atof(line[20:28]) / 10.0
    return stamp, level, pressure


def main(path):
    count = 0
    for line in open(path):
        if line.startswith("*"):
            continue
        stamp, level, pressure = parse_line(line)
        print "%s\t%.3f\t%.1f" % (stamp, level, pressure)
        count += 1
    print >>sys.stderr, "converted %d readings" % count


if __name__ == "__main__":
    main(sys.argv[1])
