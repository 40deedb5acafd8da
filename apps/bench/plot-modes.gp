# Clustered bars: each --comm mode's speed-up over mpi, one cluster per (ranks, n).
# gnuplot -e "matrix='FILE.matrix'; png='FILE.png'; columns=N" plot-modes.gp
set terminal pngcairo size 900,500 noenhanced font ",11"
set output png
set title "halo2d: speed-up per iteration over --comm mpi (same run; higher is better)"
set ylabel "mpi time / mode time"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top right
set grid ytics
set yrange [0:*]
set datafile separator "\t"
plot for [c = 2:columns] matrix using c:xtic(1) title columnheader(c)
