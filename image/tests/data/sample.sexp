(define (fib n) (if (< n 2) n (add (fib (sub n 1)) (fib (sub n 2)))))
(define greeting "hello, \"world\"\n\ttabbed, with a NUL \x00 inside")
(define table #(1 -2 3 #() #(nested (list . tail)) () "s"))
(define ops (list #<add (1 2) > #<mul () > #<max #(x y) >))
(quote (a b c a b c))
(dotted . pair)
-9223372036854775808
9223372036854775807
(symbols-with->-and-#-inside ->x >= <=)
"\xff\x01"
