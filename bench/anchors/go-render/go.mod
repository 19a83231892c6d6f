module servicelb/bench/anchors/go-render

go 1.19
