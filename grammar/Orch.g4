// The orch language. docs/language.md is the reference; this file is its syntax.
// Statements need no terminator: every statement starts with a keyword or with
// `name <<<` / `name =`, so an expression always ends where the next statement begins.
grammar Orch;

file : PIPELINE ident decl* EOF ;

decl
  : targetDecl
  | paramDecl
  | bufferDecl
  | commDecl
  | kernelDecl
  | graphDecl
  | SEMI
  ;

targetDecl : TARGET ident (COMMA ident)* ;
paramDecl : PARAM ident COLON ident (ASSIGN expr)? ;
bufferDecl : BUFFER ident COLON ident (LBRACK expr RBRACK)? bufferAttr* ;
// `host`: pinned, device-mapped host memory; `keep`: never shares memory with another buffer
// (the memory plan leaves it alone, so its contents stay readable between launches);
// `symmetric`: on NVSHMEM's symmetric heap, the same size on every PE (docs/multi-gpu.md).
bufferAttr : HOST | KEEP | SYMMETRIC ;
commDecl : COMM ident ;

kernelDecl : KERNEL ident LPAREN (kernelParam (COMMA kernelParam)*)? RPAREN kernelClause* ;
kernelParam : ident COLON access=(IN | OUT | INOUT)? kernelType ;
kernelType
  : COND                                  # condType
  | GRAPH (LBRACK expr RBRACK)?           # graphType
  | ident (LBRACK RBRACK)?                # dataType
  ;
kernelClause
  : LAUNCHES launchBudget (COMMA launchBudget)*   # launchesClause
  | ENTRY STRING                                   # entryClause
  | FROM STRING                                    # fromClause
  | SOURCE TRIPLE_STRING                           # sourceClause
  | COST costItem (COMMA costItem)*                # costClause
  ;
// `cost bytes 12 * n, flops 2 * n`: what one launch moves and computes, over the kernel's value
// parameters (orch-run --roofline uses it where the GPU's counters cannot be read).
costItem : ident (LBRACK ident RBRACK)? expr ;
launchBudget : ident launchMode LE expr ;
launchMode : TAIL | FIRE_AND_FORGET | SIBLING ;

graphDecl : GRAPH ident (LBRACK ident COLON expr RBRACK)? DEVICE? block ;

block : LBRACE stmt* RBRACE ;

stmt
  : ident LAUNCH_OPEN expr COMMA expr (COMMA expr)? LAUNCH_CLOSE LPAREN (expr (COMMA expr)*)? RPAREN   # kernelLaunchStmt
  | COPY ident ARROW ident                                  # copyStmt
  | FILL ident ASSIGN expr                                  # fillStmt
  | ident op=(ASSIGN | PLUS_ASSIGN | MINUS_ASSIGN | STAR_ASSIGN | SLASH_ASSIGN) expr   # assignStmt
  | ifStmt                                                  # ifStmtAlt
  | WHILE KERNEL block                                      # whileKernelStmt
  | WHILE expr block                                        # whileStmt
  | SWITCH expr LBRACE switchCase* (DEFAULT block)? RBRACE  # switchStmt
  | CALL ident                                              # callStmt
  | LAUNCH ident (LBRACK expr RBRACK)? launchMode           # launchStmt
  | ALLREDUCE ident ident (ARROW ident)? ON ident           # allreduceStmt
  | BROADCAST ident (ARROW ident)? (FROM expr)? ON ident    # broadcastStmt
  | ALLGATHER ident ARROW ident ON ident                    # allgatherStmt
  | REDUCE_SCATTER ident ident ARROW ident ON ident         # reduceScatterStmt
  // NVSHMEM between kernels (docs/multi-gpu.md): each becomes a kernel orchc writes, so it may
  // stand in conditional bodies and device graphs. `put ... signal s = v` is one put-with-signal;
  // a `signal` statement of its own always names its peer with `on`.
  | PUT ident ARROW ident ON expr (SIGNAL ident sigop=(ASSIGN | PLUS_ASSIGN) expr)?   # putStmt
  | GET ident ARROW ident FROM expr                         # getStmt
  | SIGNAL ident sigop=(ASSIGN | PLUS_ASSIGN) expr ON expr  # signalStmt
  | WAIT ident cmp=(EQ | NE | LT | LE | GT | GE) expr       # waitStmt
  | QUIET                                                   # quietStmt
  | BARRIER                                                 # barrierStmt
  | SEMI                                                    # emptyStmt
  ;

ifStmt : IF expr block (ELSE (block | ifStmt))? ;
switchCase : CASE expr block ;

expr
  : LPAREN expr RPAREN                                   # parenExpr
  | ident LPAREN (expr (COMMA expr)*)? RPAREN            # callExpr
  | op=(MINUS | PLUS | NOT | TILDE) expr                 # unaryExpr
  | expr op=(STAR | SLASH | PERCENT) expr                # binaryExpr
  | expr op=(PLUS | MINUS) expr                          # binaryExpr
  | expr op=(SHL | SHR) expr                             # binaryExpr
  | expr op=(LT | LE | GT | GE) expr                     # binaryExpr
  | expr op=(EQ | NE) expr                               # binaryExpr
  | expr op=AMP expr                                     # binaryExpr
  | expr op=CARET expr                                   # binaryExpr
  | expr op=PIPE expr                                    # binaryExpr
  | expr op=AND expr                                     # binaryExpr
  | expr op=OR expr                                      # binaryExpr
  | INT                                                  # intExpr
  | FLOAT                                                # floatExpr
  | (TRUE | FALSE)                                       # boolExpr
  | ident                                                # nameExpr
  ;

// Words that only mean something in one position stay usable as names (`out`, `self`, ...).
ident
  : ID | IN | OUT | INOUT | HOST | KEEP | DEVICE | COND | SELF | FROM | SOURCE | ENTRY | LAUNCHES
  | TAIL | FIRE_AND_FORGET | SIBLING | ON | COST | SYMMETRIC
  | PUT | GET | SIGNAL | WAIT | QUIET | BARRIER
  ;

PIPELINE : 'pipeline' ;
TARGET : 'target' ;
PARAM : 'param' ;
BUFFER : 'buffer' ;
COMM : 'comm' ;
KERNEL : 'kernel' ;
GRAPH : 'graph' ;
IF : 'if' ;
ELSE : 'else' ;
WHILE : 'while' ;
SWITCH : 'switch' ;
CASE : 'case' ;
DEFAULT : 'default' ;
CALL : 'call' ;
LAUNCH : 'launch' ;
COPY : 'copy' ;
FILL : 'fill' ;
ALLREDUCE : 'allreduce' ;
BROADCAST : 'broadcast' ;
ALLGATHER : 'allgather' ;
REDUCE_SCATTER : 'reduce_scatter' ;
TRUE : 'true' ;
FALSE : 'false' ;

IN : 'in' ;
OUT : 'out' ;
INOUT : 'inout' ;
HOST : 'host' ;
KEEP : 'keep' ;
SYMMETRIC : 'symmetric' ;
DEVICE : 'device' ;
COND : 'cond' ;
SELF : 'self' ;
FROM : 'from' ;
SOURCE : 'source' ;
ENTRY : 'entry' ;
LAUNCHES : 'launches' ;
COST : 'cost' ;
TAIL : 'tail' ;
FIRE_AND_FORGET : 'fire_and_forget' ;
SIBLING : 'sibling' ;
ON : 'on' ;
PUT : 'put' ;
GET : 'get' ;
SIGNAL : 'signal' ;
WAIT : 'wait' ;
QUIET : 'quiet' ;
BARRIER : 'barrier' ;

LAUNCH_OPEN : '<<<' ;
LAUNCH_CLOSE : '>>>' ;
ARROW : '->' ;
PLUS_ASSIGN : '+=' ;
MINUS_ASSIGN : '-=' ;
STAR_ASSIGN : '*=' ;
SLASH_ASSIGN : '/=' ;
SHL : '<<' ;
SHR : '>>' ;
LE : '<=' ;
GE : '>=' ;
EQ : '==' ;
NE : '!=' ;
AND : '&&' ;
OR : '||' ;
LT : '<' ;
GT : '>' ;
ASSIGN : '=' ;
PLUS : '+' ;
MINUS : '-' ;
STAR : '*' ;
SLASH : '/' ;
PERCENT : '%' ;
NOT : '!' ;
TILDE : '~' ;
AMP : '&' ;
CARET : '^' ;
PIPE : '|' ;
LPAREN : '(' ;
RPAREN : ')' ;
LBRACE : '{' ;
RBRACE : '}' ;
LBRACK : '[' ;
RBRACK : ']' ;
COMMA : ',' ;
COLON : ':' ;
SEMI : ';' ;

FLOAT
  : DIGIT+ '.' DIGIT* EXPONENT?
  | '.' DIGIT+ EXPONENT?
  | DIGIT+ EXPONENT
  ;
INT : '0' [xX] HEX_DIGIT+ | DIGIT+ ;
ID : [a-zA-Z_] [a-zA-Z_0-9]* ;
TRIPLE_STRING : '"""' .*? '"""' ;
STRING : '"' (~["\\\r\n] | '\\' .)* '"' ;

LINE_COMMENT : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n]+ -> skip ;
// Anything else becomes a token the parser rejects, so a stray character is a syntax
// error at its place rather than a lexer message on stderr.
UNEXPECTED_CHAR : . ;

fragment DIGIT : [0-9] ;
fragment HEX_DIGIT : [0-9a-fA-F] ;
fragment EXPONENT : [eE] [+-]? DIGIT+ ;
